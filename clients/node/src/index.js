// vesta-rs from Node: a gRPC client of `vesta serve rest` (`Client`) and IDs explained offline
// in any vesta layout (`Layout`). IDs are BigInts (or exact decimal strings), never numbers.
"use strict";

const { Client } = require("./client");
const { VestaError } = require("./errors");
const { Explanation, Layout, LayoutError, PRESETS, parseId, rfc3339 } = require("./layout");

module.exports = { Client, Explanation, Layout, LayoutError, PRESETS, VestaError, parseId, rfc3339 };

//! The central vesta-rs TCP issuer and its client (being built).

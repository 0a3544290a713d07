//! The console's HTML: escaping, the page shell (head, style, navigation) and table rows. Every
//! text a page shows goes through [`esc`] or [`Html::text`], so nothing a request carries (an
//! ID, a tag, an error echoing a value) can become markup. No JavaScript, nothing fetched: the
//! style is inline and the pages forbid everything else (see `CONTENT_SECURITY_POLICY`).

use std::fmt::{self, Write};

/// What the browser may load for a console page: only its own inline style; no script, no
/// image, no frame, forms to this origin only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// `s` with `& < > " '` escaped, for text and attribute values alike.
pub fn esc(s: &str) -> Escaped<'_> {
    Escaped(s)
}

/// Text that writes itself escaped.
pub struct Escaped<'a>(&'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(i) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..i])?;
            f.write_str(match rest.as_bytes()[i] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[i + 1..];
        }
        f.write_str(rest)
    }
}

/// The pages in the navigation bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nav {
    /// `/ui/explain`.
    Explain,
    /// `/ui/status`.
    Status,
    /// `/ui/segments`.
    Segments,
    /// `/ui/seq`.
    Seq,
    /// None highlighted (the not-found page).
    None,
}

/// The pages only some servers have, linked in the navigation bar when on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Modes {
    /// Segment mode (`[segment] db`): `/ui/segments`.
    pub segments: bool,
    /// Per-key sequences (`[seq] db`): `/ui/seq`.
    pub seq: bool,
}

/// A page being written: markup pushed as is, text escaped.
#[derive(Default)]
pub struct Html(String);

impl Html {
    /// Pushes trusted markup (literals of this crate, never request data).
    pub fn raw(&mut self, markup: &str) -> &mut Self {
        self.0.push_str(markup);
        self
    }

    /// Pushes `value` escaped.
    pub fn text(&mut self, value: impl fmt::Display) -> &mut Self {
        let s = value.to_string();
        let _ = write!(self.0, "{}", esc(&s));
        self
    }

    /// An `<h2>` heading.
    pub fn heading(&mut self, title: &str) -> &mut Self {
        self.raw("<h2>").text(title).raw("</h2>\n")
    }

    /// A paragraph of text.
    pub fn para(&mut self, class: &str, value: impl fmt::Display) -> &mut Self {
        let _ = write!(self.0, "<p class=\"{class}\">");
        self.text(value).raw("</p>\n")
    }

    /// An error paragraph, announced to screen readers.
    pub fn error(&mut self, message: impl fmt::Display) -> &mut Self {
        self.raw("<p class=\"error\" role=\"alert\">")
            .text(message)
            .raw("</p>\n")
    }

    /// Opens a two-column table of facts (`th` for the name, `td` for the value).
    pub fn facts(&mut self, id: &str) -> &mut Self {
        let _ = writeln!(self.0, "<table class=\"facts\" id=\"{id}\">");
        self
    }

    /// One row of a facts table; `key` becomes the row's `data-key` for tests and scrapers.
    pub fn fact(&mut self, key: &str, name: &str, value: impl fmt::Display) -> &mut Self {
        self.fact_flagged(key, name, value, false)
    }

    /// A facts row whose value is marked as a problem (`class="bad"`) when `bad`.
    pub fn fact_flagged(
        &mut self,
        key: &str,
        name: &str,
        value: impl fmt::Display,
        bad: bool,
    ) -> &mut Self {
        let class = if bad { " class=\"bad\"" } else { "" };
        let _ = write!(self.0, "<tr data-key=\"{}\"><th>", esc(key));
        self.text(name).raw("</th><td").raw(class).raw(">");
        self.text(value).raw("</td></tr>\n")
    }

    /// Opens a table with these column headings.
    pub fn table(&mut self, id: &str, columns: &[&str]) -> &mut Self {
        let _ = write!(self.0, "<div class=\"wide\"><table id=\"{id}\"><thead><tr>");
        for c in columns {
            self.raw("<th>").text(c).raw("</th>");
        }
        self.raw("</tr></thead><tbody>\n")
    }

    /// One row of cells; `key` becomes the row's `data-key`.
    pub fn row(&mut self, key: &str, cells: &[&dyn fmt::Display]) -> &mut Self {
        let _ = write!(self.0, "<tr data-key=\"{}\">", esc(key));
        for c in cells {
            self.raw("<td>").text(c).raw("</td>");
        }
        self.raw("</tr>\n")
    }

    /// Closes a table opened by [`Html::table`].
    pub fn end_table(&mut self) -> &mut Self {
        self.raw("</tbody></table></div>\n")
    }

    /// Closes a table opened by [`Html::facts`].
    pub fn end_facts(&mut self) -> &mut Self {
        self.raw("</table>\n")
    }

    /// The page so far.
    pub fn into_string(self) -> String {
        self.0
    }
}

/// A whole page: the shell around `body`. `refresh_s` reloads it by itself (status pages), so
/// it stays current without script.
pub fn page(title: &str, nav: Nav, modes: Modes, refresh_s: Option<u32>, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 2048);
    out.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"referrer\" content=\"no-referrer\">\n",
    );
    if let Some(s) = refresh_s {
        let _ = writeln!(out, "<meta http-equiv=\"refresh\" content=\"{s}\">");
    }
    let _ = writeln!(out, "<title>{} · vesta console</title>", esc(title));
    out.push_str(STYLE);
    out.push_str("</head><body>\n<header><strong>vesta</strong><nav>");
    let mut link = |href: &str, label: &str, here: bool| {
        let current = if here { " aria-current=\"page\"" } else { "" };
        let _ = write!(out, "<a href=\"{href}\"{current}>{label}</a>");
    };
    link("/ui/explain", "Explain", nav == Nav::Explain);
    link("/ui/status", "Status", nav == Nav::Status);
    if modes.segments {
        link("/ui/segments", "Segments", nav == Nav::Segments);
    }
    if modes.seq {
        link("/ui/seq", "Sequences", nav == Nav::Seq);
    }
    out.push_str("</nav></header>\n<main>\n");
    let _ = writeln!(out, "<h1>{}</h1>", esc(title));
    out.push_str(body);
    out.push_str("</main>\n</body></html>\n");
    out
}

/// The style: readable on a phone (one column, tables scroll sideways) and on a desktop.
const STYLE: &str = "<style>
:root{color-scheme:light dark;--fg:#1b1f24;--bg:#fff;--muted:#57606a;--line:#d0d7de;--accent:#0969da;--bad:#cf222e;--warn:#9a6700;--good:#1a7f37}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--bg:#0d1117;--muted:#8d96a0;--line:#30363d;--accent:#4493f8;--bad:#f85149;--warn:#d29922;--good:#3fb950}}
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{display:flex;flex-wrap:wrap;gap:.5rem 1.5rem;align-items:center;padding:.6rem 1rem;border-bottom:1px solid var(--line)}
nav{display:flex;gap:1rem}
nav a{color:var(--accent);text-decoration:none;padding:.2rem 0}
nav a[aria-current]{font-weight:600;border-bottom:2px solid var(--accent)}
main{max-width:72rem;margin:0 auto;padding:0 1rem 2rem}
h1{font-size:1.35rem;margin:1rem 0 .5rem}
h2{font-size:1.1rem;margin:1.5rem 0 .5rem}
table{border-collapse:collapse;margin:.25rem 0 1rem}
th,td{text-align:left;padding:.3rem .7rem .3rem 0;border-bottom:1px solid var(--line);vertical-align:top}
td{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9em;overflow-wrap:anywhere}
thead th{font-size:.85em;color:var(--muted);white-space:nowrap}
.facts th{font-weight:500;color:var(--muted);white-space:nowrap}
@media (max-width:640px){.facts th{white-space:normal;width:38%}.facts td{width:62%}}
.wide{overflow-x:auto;max-width:100%}
form{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:flex-end;margin:.5rem 0 1rem}
label{display:flex;flex-direction:column;font-size:.85em;color:var(--muted);gap:.15rem}
input,select{font:inherit;font-size:1rem;padding:.35rem .5rem;border:1px solid var(--line);border-radius:4px;background:var(--bg);color:var(--fg);max-width:calc(100vw - 2rem)}
input[name=id]{width:24rem}
input.num{width:9rem}
button{font:inherit;padding:.4rem 1rem;border:1px solid var(--accent);border-radius:4px;background:var(--accent);color:#fff;cursor:pointer}
.error{color:var(--bad);border-left:3px solid var(--bad);padding:.3rem .6rem;overflow-wrap:anywhere}
.warn{color:var(--warn);border-left:3px solid var(--warn);padding:.3rem .6rem}
.muted{color:var(--muted);font-size:.9em}
.ok{color:var(--good)}.bad{color:var(--bad)}
svg{display:block;max-width:100%;height:auto;border-bottom:1px solid var(--line)}
svg rect{fill:var(--accent)}
</style>
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_everything_markup_could_hide_in() {
        let hostile = r#"<script>alert("x")</script>&'"#;
        assert_eq!(
            esc(hostile).to_string(),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"
        );
        let mut h = Html::default();
        h.fact("k\"<", "<b>", "<i>").row("<x>", &[&"<td>"]);
        h.fact_flagged("<k>", "<u>", "<s>", true);
        let out = h.into_string();
        assert!(!out.contains("<b>") && !out.contains("<i>") && !out.contains("<x>"));
        assert!(!out.contains("<k>") && !out.contains("<u>") && !out.contains("<s>"));
        assert!(out.contains("<td class=\"bad\">&lt;s&gt;</td>"));
        assert!(!out.contains("<td><td>"));
    }

    #[test]
    fn a_page_carries_no_script_and_names_its_title() {
        let both = Modes {
            segments: true,
            seq: true,
        };
        let p = page("A <title>", Nav::Status, both, Some(5), "<p>body</p>");
        assert!(p.contains("<title>A &lt;title&gt; · vesta console</title>"));
        assert!(p.contains("http-equiv=\"refresh\" content=\"5\""));
        assert!(p.contains("href=\"/ui/segments\""));
        assert!(p.contains("href=\"/ui/seq\""));
        assert!(!p.contains("<script"));
        let p = page("x", Nav::Explain, Modes::default(), None, "");
        assert!(!p.contains("/ui/segments"));
        assert!(!p.contains("/ui/seq"));
        assert!(!p.contains("refresh"));
    }
}

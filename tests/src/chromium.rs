//! A real browser for the console tests: Debian's `chromium` in headless mode, one process per
//! page (a throwaway profile each, killed by PID when it overruns its time limit), to read a
//! page's DOM as the browser built it or to save a screenshot; and small readers of the
//! console's tables (rows carry `data-key`), so a test checks what a person would see.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest one page load may take; a browser still running then is killed.
const PAGE_LIMIT: Duration = Duration::from_secs(90);

/// The browser, if installed (Debian's `chromium` package; scripts/test installs it).
pub fn binary() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Runs the browser on `url` with `args`, and returns its stdout.
fn run(browser: &Path, args: &[String], url: &str) -> String {
    let profile = tempfile::tempdir().expect("a browser profile directory");
    let out = tempfile::NamedTempFile::new().expect("a file for the browser's output");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(url)
        .stdout(out.reopen().expect("reopen"))
        .stderr(Stdio::null())
        .spawn()
        .expect("starting chromium");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("waiting for chromium") {
            assert!(status.success(), "chromium on {url} exited {status}");
            break;
        }
        if start.elapsed() > PAGE_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish {url} within {PAGE_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::read_to_string(out.path()).expect("reading the browser's output")
}

/// The DOM of `url` as the browser built it (serialized), after the page loaded.
pub fn dom(browser: &Path, url: &str) -> String {
    run(browser, &["--dump-dom".into()], url)
}

/// Saves a `width`×`height` screenshot of `url` to `file` (PNG).
pub fn screenshot(browser: &Path, url: &str, width: u32, height: u32, file: &Path) {
    run(
        browser,
        &[
            format!("--screenshot={}", file.display()),
            format!("--window-size={width},{height}"),
        ],
        url,
    );
}

/// The width and height a PNG file says it has (its IHDR chunk).
pub fn png_size(file: &Path) -> (u32, u32) {
    let bytes = std::fs::read(file).expect("reading the screenshot");
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is not a PNG",
        file.display()
    );
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

/// The cells (`th` and `td`, text only) of the row `data-key="key"` in the table `id="table"`.
pub fn row(dom: &str, table: &str, key: &str) -> Option<Vec<String>> {
    let start = dom.find(&format!("id=\"{table}\""))?;
    let body = &dom[start..];
    let body = &body[..body.find("</table>")?];
    let at = body.find(&format!("data-key=\"{key}\""))?;
    let tr = &body[at..];
    let tr = &tr[..tr.find("</tr>")?];
    let mut cells = Vec::new();
    let mut rest = tr;
    while let Some(open) = rest.find(['<']) {
        let tag_end = rest[open..].find('>')? + open;
        let tag = &rest[open + 1..tag_end];
        rest = &rest[tag_end + 1..];
        if tag.starts_with("td") || tag.starts_with("th") {
            let close = rest.find("</t")?;
            cells.push(unescape(&strip_tags(&rest[..close])));
            rest = &rest[close..];
        }
    }
    Some(cells)
}

/// The value cell of a facts row (`th` name, `td` value).
pub fn fact(dom: &str, table: &str, key: &str) -> Option<String> {
    row(dom, table, key)?.pop()
}

/// The text of the page's error paragraphs.
pub fn errors(dom: &str) -> Vec<String> {
    dom.match_indices("<p class=\"error\"")
        .filter_map(|(at, _)| {
            let p = &dom[at..];
            let text = &p[p.find('>')? + 1..p.find("</p>")?];
            Some(unescape(text))
        })
        .collect()
}

fn strip_tags(s: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

//! The code blocks of the guides in docs/, so tests run them as a reader would copy them.

/// Every fenced block of `lang` (```toml, ```sh) in the repository file `rel`, in order, with
/// the line it starts on (for messages).
pub fn snippets(rel: &str, lang: &str) -> Vec<(usize, String)> {
    let text = crate::deploy::read(rel);
    let fence = format!("```{lang}");
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        match &mut current {
            None if line.trim_end() == fence => current = Some((n + 2, String::new())),
            None => {}
            Some(_) if line.trim_end() == "```" => blocks.extend(current.take()),
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    assert!(current.is_none(), "{rel}: an unclosed ```{lang} block");
    blocks
}

/// The one block of `lang` in `rel` that contains `marker`.
pub fn snippet_with(rel: &str, lang: &str, marker: &str) -> String {
    let mut found: Vec<String> = snippets(rel, lang)
        .into_iter()
        .map(|(_, body)| body)
        .filter(|body| body.contains(marker))
        .collect();
    assert_eq!(found.len(), 1, "{rel}: one ```{lang} block with {marker:?}");
    found.remove(0)
}

/// A fenced block of a guide: its language (the fence's info string: `sh`, `rust,no_run`), the
/// line its body starts on, and its body.
#[derive(Clone, Debug)]
pub struct Block {
    /// The info string after the opening fence.
    pub lang: String,
    /// The line the body starts on (1-based), for messages.
    pub line: usize,
    /// The body, every line ending in `\n`.
    pub body: String,
}

/// Every fenced block of the repository file `rel`, in order, whatever its language.
pub fn blocks(rel: &str) -> Vec<Block> {
    let text = crate::deploy::read(rel);
    let mut out = Vec::new();
    let mut current: Option<Block> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_end();
        match &mut current {
            None => {
                if let Some(lang) = trimmed.strip_prefix("```") {
                    current = Some(Block {
                        lang: lang.trim().to_owned(),
                        line: n + 2,
                        body: String::new(),
                    });
                }
            }
            Some(_) if trimmed == "```" => out.extend(current.take()),
            Some(block) => {
                block.body.push_str(line);
                block.body.push('\n');
            }
        }
    }
    assert!(current.is_none(), "{rel}: an unclosed block");
    out
}

/// One command of a ```console block (`$ CMD`, a `\` at a line's end continuing it) and the
/// lines it prints (up to the next `$`).
#[derive(Clone, Debug)]
pub struct ConsoleStep {
    /// The command, without its `$ `.
    pub command: String,
    /// What the page says it prints, one entry a line.
    pub output: Vec<String>,
}

/// The steps of a ```console block.
pub fn console_steps(body: &str) -> Vec<ConsoleStep> {
    let mut steps: Vec<ConsoleStep> = Vec::new();
    let mut continued = false;
    for line in body.lines() {
        if let Some(command) = line.strip_prefix("$ ") {
            steps.push(ConsoleStep {
                command: command.to_owned(),
                output: Vec::new(),
            });
            continued = command.ends_with('\\');
        } else if continued {
            let step = steps.last_mut().expect("a continued command");
            step.command.push('\n');
            step.command.push_str(line);
            continued = line.ends_with('\\');
        } else {
            steps
                .last_mut()
                .unwrap_or_else(|| panic!("output before any command: {line}"))
                .output
                .push(line.to_owned());
        }
    }
    steps
}

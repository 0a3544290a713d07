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

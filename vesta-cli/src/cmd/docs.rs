//! `vesta completions SHELL` and `vesta man DIR`: shell completions (clap_complete) and man
//! pages (clap_mangen) generated from the same clap definitions the binary parses with, so they
//! cannot drift from the real flags.

use std::fs;
use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::Context;
use clap_complete::Shell;

/// Arguments of `vesta completions`.
#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for; the script goes to stdout (e.g. bash:
    /// `vesta completions bash > /etc/bash_completion.d/vesta`)
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Arguments of `vesta man`.
#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// Directory to write the pages to (created if missing): vesta.1 and one vesta-SUB.1 per
    /// subcommand, e.g. /usr/local/share/man/man1
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Writes the completion script for `args.shell` to stdout.
pub fn completions(args: CompletionsArgs, mut command: clap::Command) -> anyhow::Result<()> {
    let mut out = Vec::with_capacity(64 * 1024);
    clap_complete::generate(args.shell, &mut command, "vesta", &mut out);
    io::stdout().lock().write_all(&out)?;
    Ok(())
}

/// Writes one man page per command into `args.dir` and lists them on stdout.
pub fn man(args: ManArgs, command: clap::Command) -> anyhow::Result<()> {
    let dir = &args.dir;
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    clap_mangen::generate_to(command, dir)
        .with_context(|| format!("writing man pages to {}", dir.display()))?;
    let mut pages: Vec<_> = fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "1"))
        .collect();
    pages.sort();
    let mut out = io::stdout().lock();
    for page in pages {
        writeln!(out, "{}", page.display())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    /// Every subcommand as its path of names, e.g. `["serve", "tcp"]`.
    fn subcommand_paths(cmd: &clap::Command, prefix: &[String], out: &mut Vec<Vec<String>>) {
        for sub in cmd.get_subcommands() {
            let mut path = prefix.to_vec();
            path.push(sub.get_name().to_owned());
            out.push(path.clone());
            subcommand_paths(sub, &path, out);
        }
    }

    fn all_subcommands() -> Vec<Vec<String>> {
        let mut paths = Vec::new();
        subcommand_paths(&crate::command(), &[], &mut paths);
        paths
    }

    /// How each shell's script names the subcommand at `path` (e.g. `["serve", "tcp"]`), so
    /// the check is for the subcommand's own entry, not any word that happens to match.
    fn entry(shell: Shell, path: &[String]) -> String {
        let (parents, name) = path.split_at(path.len() - 1);
        let name = &name[0];
        match shell {
            Shell::Bash => {
                let mut parent = String::from("vesta");
                for p in parents {
                    parent.push_str("__subcmd__");
                    parent.push_str(p);
                }
                format!("{parent},{name})")
            }
            Shell::Zsh => format!("'vesta {} commands'", path.join(" ")),
            Shell::Fish if parents.is_empty() => {
                format!("__fish_vesta_needs_command\" -f -a \"{name}\"")
            }
            Shell::Fish => {
                format!(
                    "__fish_vesta_using_subcommand {}; and not __fish_seen_subcommand_from",
                    parents.join(" ")
                ) + &format!("\" -f -a \"{name}\"")
            }
            _ => format!("'vesta;{}'", path.join(";")),
        }
    }

    #[test]
    fn each_shell_gets_a_script_naming_every_subcommand() {
        let paths = all_subcommands();
        for wanted in [
            &["serve", "tcp"][..],
            &["segment", "get"],
            &["completions"],
            &["man"],
        ] {
            assert!(paths.iter().any(|p| p == wanted), "{wanted:?} in {paths:?}");
        }
        let names: Vec<_> = Shell::value_variants()
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(names, ["bash", "elvish", "fish", "powershell", "zsh"]);
        for shell in Shell::value_variants() {
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut crate::command(), "vesta", &mut script);
            let script = String::from_utf8(script).unwrap();
            for path in &paths {
                let entry = entry(*shell, path);
                let found = match shell {
                    // fish: the condition lists the siblings between the two halves.
                    Shell::Fish if path.len() > 1 => {
                        let (head, tail) = entry.split_once("\" -f -a").unwrap();
                        script
                            .lines()
                            .any(|l| l.contains(head) && l.contains(&format!("\" -f -a{tail}")))
                    }
                    _ => script.contains(&entry),
                };
                assert!(
                    found,
                    "{shell} completions have no entry {entry} for {path:?}"
                );
            }
        }
    }

    #[test]
    fn man_writes_a_page_per_subcommand_and_each_parent_lists_its_children() {
        let dir = tempfile::tempdir().unwrap();
        man(
            ManArgs {
                dir: dir.path().join("man1"),
            },
            crate::command(),
        )
        .unwrap();
        let read = |name: &str| {
            let path = dir.path().join("man1").join(format!("{name}.1"));
            fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        let top = read("vesta");
        assert!(top.starts_with(".ie"), "{}", &top[..40.min(top.len())]);
        for path in all_subcommands() {
            let page = read(&format!("vesta-{}", path.join("-")));
            let roff_name = format!("vesta\\-{}", path.join("\\-"));
            assert!(
                page.contains(&format!(".SH NAME\n{roff_name} \\- ")),
                "{path:?}"
            );
            // The parent's page lists it among its subcommands.
            let parent = match &path[..path.len() - 1] {
                [] => top.clone(),
                p => read(&format!("vesta-{}", p.join("-"))),
            };
            assert!(
                parent.contains(&format!("{roff_name}(1)")),
                "the page of {:?} does not list {roff_name}(1)",
                &path[..path.len() - 1]
            );
        }
        // The top page carries the long version: the defaults in force.
        assert!(top.contains("1420041600000 ms"), "{top}");
    }
}

//! The unified diff `edit_file` answers with, byte for byte as the original's (jsdiff 8's
//! `createTwoFilesPatch` with its defaults: four lines of context, an `Index:` line and the
//! underline, `\ No newline at end of file` where a side ends without one).
//!
//! The line diff is Myers' algorithm explored in jsdiff's order (diagonals from the lowest,
//! a removal preferred over an insertion unless the insertion reaches further into the old
//! text, pruning at the edges of the edit graph), so that where several shortest diffs exist
//! the same one is chosen.

use std::rc::Rc;

/// A run of equal, added or removed lines, linked to the run before it.
struct Run {
    count: usize,
    added: bool,
    removed: bool,
    previous: Option<Rc<Run>>,
}

/// How far along a diagonal a path has come, and its runs so far.
#[derive(Clone)]
struct Path {
    old_pos: isize,
    last: Option<Rc<Run>>,
}

/// One change of the diff: `count` lines, equal, added or removed.
struct Change {
    added: bool,
    removed: bool,
    lines: Vec<String>,
}

/// jsdiff's line tokens: each line with its line break (`\n` or `\r\n`), the empty one after
/// a final break dropped.
fn tokenize(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    for (i, _) in text.match_indices('\n') {
        lines.push(&text[start..=i]);
        start = i + 1;
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

fn extend(path: &Path, added: bool, removed: bool, old_inc: isize) -> Path {
    let run = match &path.last {
        Some(last) if last.added == added && last.removed == removed => Run {
            count: last.count + 1,
            added,
            removed,
            previous: last.previous.clone(),
        },
        last => Run {
            count: 1,
            added,
            removed,
            previous: last.clone(),
        },
    };
    Path {
        old_pos: path.old_pos + old_inc,
        last: Some(Rc::new(run)),
    }
}

/// Follow the diagonal while lines match; the new position reached.
fn snake(path: &mut Path, new: &[&str], old: &[&str], diagonal: isize) -> isize {
    let (new_len, old_len) = (len(new), len(old));
    let mut old_pos = path.old_pos;
    let mut new_pos = old_pos - diagonal;
    let mut common = 0;
    while new_pos + 1 < new_len
        && old_pos + 1 < old_len
        && old[idx(old_pos + 1)] == new[idx(new_pos + 1)]
    {
        new_pos += 1;
        old_pos += 1;
        common += 1;
    }
    if common > 0 {
        path.last = Some(Rc::new(Run {
            count: common,
            added: false,
            removed: false,
            previous: path.last.take(),
        }));
    }
    path.old_pos = old_pos;
    new_pos
}

fn len(tokens: &[&str]) -> isize {
    isize::try_from(tokens.len()).unwrap_or(isize::MAX)
}

fn idx(i: isize) -> usize {
    usize::try_from(i).unwrap_or(0)
}

/// The changes turning `old` into `new`, line by line.
fn diff_lines(old: &str, new: &str) -> Vec<Change> {
    let old_tokens = tokenize(old);
    let new_tokens = tokenize(new);
    let (old_len, new_len) = (len(&old_tokens), len(&new_tokens));
    let max = old_len + new_len;
    let offset = max + 1;
    let slot = |diagonal: isize| idx(diagonal + offset);
    let mut best: Vec<Option<Path>> = vec![None; idx(2 * offset + 1)];
    let mut seed = Path {
        old_pos: -1,
        last: None,
    };
    let new_pos = snake(&mut seed, &new_tokens, &old_tokens, 0);
    if seed.old_pos + 1 >= old_len && new_pos + 1 >= new_len {
        return build(seed.last, &new_tokens, &old_tokens);
    }
    best[slot(0)] = Some(seed);
    let (mut min_diagonal, mut max_diagonal) = (isize::MIN, isize::MAX);
    let mut edit_length: isize = 1;
    while edit_length <= max {
        let mut diagonal = min_diagonal.max(-edit_length);
        while diagonal <= max_diagonal.min(edit_length) {
            let remove_path = best[slot(diagonal - 1)].take();
            let add_path = best[slot(diagonal + 1)].clone();
            let can_add = add_path.as_ref().is_some_and(|p| {
                let pos = p.old_pos - diagonal;
                0 <= pos && pos < new_len
            });
            let can_remove = remove_path
                .as_ref()
                .is_some_and(|p| p.old_pos + 1 < old_len);
            if !can_add && !can_remove {
                best[slot(diagonal)] = None;
                diagonal += 2;
                continue;
            }
            // jsdiff's choice: the insertion when no removal is possible or when it reaches
            // further into the old text, else the removal.
            let add_further = match (&remove_path, &add_path) {
                (Some(remove), Some(add)) => remove.old_pos < add.old_pos,
                _ => false,
            };
            let chosen = if !can_remove || (can_add && add_further) {
                add_path.as_ref().map(|add| extend(add, true, false, 0))
            } else {
                remove_path
                    .as_ref()
                    .map(|remove| extend(remove, false, true, 1))
            };
            let Some(mut base) = chosen else {
                diagonal += 2;
                continue;
            };
            let new_pos = snake(&mut base, &new_tokens, &old_tokens, diagonal);
            if base.old_pos + 1 >= old_len && new_pos + 1 >= new_len {
                return build(base.last, &new_tokens, &old_tokens);
            }
            if base.old_pos + 1 >= old_len {
                max_diagonal = max_diagonal.min(diagonal - 1);
            }
            if new_pos + 1 >= new_len {
                min_diagonal = min_diagonal.max(diagonal + 1);
            }
            best[slot(diagonal)] = Some(base);
            diagonal += 2;
        }
        edit_length += 1;
    }
    // Unreachable: an edit script of `old + new` lines always exists.
    build(None, &new_tokens, &old_tokens)
}

/// The runs of a finished path, first to last, with their lines.
fn build(last: Option<Rc<Run>>, new: &[&str], old: &[&str]) -> Vec<Change> {
    let mut runs = Vec::new();
    let mut next = last;
    while let Some(run) = next {
        next = run.previous.clone();
        runs.push(run);
    }
    runs.reverse();
    let (mut new_pos, mut old_pos) = (0, 0);
    runs.iter()
        .map(|run| {
            let lines = if run.removed {
                let lines = &old[old_pos..(old_pos + run.count).min(old.len())];
                old_pos += run.count;
                lines
            } else {
                let lines = &new[new_pos..(new_pos + run.count).min(new.len())];
                new_pos += run.count;
                if !run.added {
                    old_pos += run.count;
                }
                lines
            };
            Change {
                added: run.added,
                removed: run.removed,
                lines: lines.iter().map(|l| (*l).to_owned()).collect(),
            }
        })
        .collect()
}

/// One hunk: where it starts on each side, how many lines, and its lines.
struct Hunk {
    old_start: usize,
    old_lines: usize,
    new_start: usize,
    new_lines: usize,
    lines: Vec<String>,
}

/// `createTwoFilesPatch(name, name, old, new, "original", "modified")`.
pub fn unified(name: &str, old: &str, new: &str) -> String {
    const CONTEXT: usize = 4;
    let mut changes = diff_lines(old, new);
    changes.push(Change {
        added: false,
        removed: false,
        lines: Vec::new(),
    });
    let context = |lines: &[String]| lines.iter().map(|l| format!(" {l}")).collect::<Vec<_>>();
    let mut hunks = Vec::new();
    let (mut old_start, mut new_start) = (0usize, 0usize);
    let mut current: Vec<String> = Vec::new();
    let (mut old_line, mut new_line) = (1usize, 1usize);
    for i in 0..changes.len() {
        let change = &changes[i];
        if change.added || change.removed {
            if old_start == 0 {
                old_start = old_line;
                new_start = new_line;
                if i > 0 {
                    let prev = &changes[i - 1].lines;
                    current = context(&prev[prev.len().saturating_sub(CONTEXT)..]);
                    old_start -= current.len();
                    new_start -= current.len();
                }
            }
            let sign = if change.added { '+' } else { '-' };
            current.extend(change.lines.iter().map(|l| format!("{sign}{l}")));
            if change.added {
                new_line += change.lines.len();
            } else {
                old_line += change.lines.len();
            }
        } else {
            if old_start != 0 {
                if change.lines.len() <= CONTEXT * 2 && i + 2 < changes.len() {
                    current.extend(context(&change.lines));
                } else {
                    let size = change.lines.len().min(CONTEXT);
                    current.extend(context(&change.lines[..size]));
                    hunks.push(Hunk {
                        old_start,
                        old_lines: old_line - old_start + size,
                        new_start,
                        new_lines: new_line - new_start + size,
                        lines: std::mem::take(&mut current),
                    });
                    old_start = 0;
                    new_start = 0;
                }
            }
            old_line += change.lines.len();
            new_line += change.lines.len();
        }
    }
    let mut out = vec![
        format!("Index: {name}"),
        "===================================================================".to_owned(),
        format!("--- {name}\toriginal"),
        format!("+++ {name}\tmodified"),
    ];
    for hunk in hunks {
        let old_start = if hunk.old_lines == 0 {
            hunk.old_start.saturating_sub(1)
        } else {
            hunk.old_start
        };
        let new_start = if hunk.new_lines == 0 {
            hunk.new_start.saturating_sub(1)
        } else {
            hunk.new_start
        };
        out.push(format!(
            "@@ -{old_start},{} +{new_start},{} @@",
            hunk.old_lines, hunk.new_lines
        ));
        for line in hunk.lines {
            match line.strip_suffix('\n') {
                Some(line) => out.push(line.to_owned()),
                None => {
                    out.push(line);
                    out.push("\\ No newline at end of file".to_owned());
                }
            }
        }
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

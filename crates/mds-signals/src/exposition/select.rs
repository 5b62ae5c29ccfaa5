//! Parsing only some families: a reader that knows which series it uses passes over the
//! others once their name is read, before any label or value, and may set lines aside to
//! decide later whether they are needed.

use super::{Page, is_name_start, name_end, parse_lines, starts_with_name};

/// What [`parse_families`] does with the sample lines of one metric name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interest {
    /// Passed over.
    Skip,
    /// Parsed now.
    Parse,
    /// Set aside unparsed for [`Page::parse_set_aside`].
    Later,
}

/// Which of one name's set-aside lines [`Page::parse_set_aside`] parses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    All,
    /// Lines up to the first that is a valid sample: enough to know the series is there.
    FirstValid,
    None,
}

/// Parses the samples whose metric name `interest` asks for, and sets aside the lines it
/// wants later. `interest` is asked once per run of lines with the same name. Comments are
/// read as [`super::parse`] reads them; [`Page::skipped`] lists only bad lines whose name was
/// parsed. The parsed samples are exactly those [`super::parse`] finds with those names, in
/// the same order.
pub fn parse_families<'a>(text: &'a str, interest: &dyn Fn(&str) -> Interest) -> Page<'a> {
    parse_lines(
        text,
        Some(Selector {
            interest,
            last_name: "",
            last: Interest::Skip,
        }),
    )
}

/// The filter of [`parse_families`] with its last answer.
pub(super) struct Selector<'f, 'a> {
    interest: &'f dyn Fn(&str) -> Interest,
    last_name: &'a str,
    last: Interest,
}

impl<'a> Selector<'_, 'a> {
    /// The interest in a sample line (blanks trimmed). A valid sample's name is the run of
    /// name bytes the line starts with, so that run alone decides, and lines of one family
    /// come in runs that repeat the answer.
    pub(super) fn interest(&mut self, line: &'a str) -> Interest {
        let bytes = line.as_bytes();
        if !starts_with_name(bytes, self.last_name) {
            if !is_name_start(bytes[0]) {
                return Interest::Skip; // no name: never a sample anyone asked for
            }
            self.last_name = &line[..name_end(bytes, 1)];
            self.last = (self.interest)(self.last_name);
        }
        self.last
    }

    /// The name the last answer was about.
    pub(super) fn name(&self) -> &'a str {
        self.last_name
    }
}

impl Page<'_> {
    /// Parses the lines [`parse_families`] set aside, as `take` says for each name (asked
    /// once per run of lines with the same name). Their
    /// samples follow the others, in page order; bad lines join [`Page::skipped`].
    pub fn parse_set_aside(&mut self, take: &dyn Fn(&str) -> Take) {
        let set_aside = std::mem::take(&mut self.set_aside);
        let mut found: Vec<&str> = Vec::new();
        // Set-aside lines come in runs of one name: ask once per run.
        let mut last: Option<(&str, Take)> = None;
        for (line_no, name, line) in set_aside {
            let answer = match last {
                Some((last_name, answer)) if last_name == name => answer,
                _ => take(name),
            };
            last = Some((name, answer));
            match answer {
                Take::None => {}
                Take::All => {
                    self.push_sample_line(line_no, line);
                }
                Take::FirstValid => {
                    if !found.contains(&name) && self.push_sample_line(line_no, line) {
                        found.push(name);
                    }
                }
            }
        }
    }
}

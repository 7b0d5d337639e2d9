//! Aligned text tables: the one renderer behind every text table of the workspace (trace
//! statistics, the collector's per-CPU table, attribution, nodes, run and study summaries,
//! validation, fidelity, predictions).
//!
//! A table is a header and rows of cells already formatted as text; each column is as wide as
//! its widest cell (counted in characters, so `µ` and `±` align), right-aligned unless set
//! left, columns separated by two spaces, no trailing blanks. No box drawing: the output reads
//! the same in a terminal and in a log. The same table renders as Markdown for reports.

use std::fmt;

/// How a column's cells are aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Padded on the right (names, labels).
    Left,
    /// Padded on the left (numbers).
    Right,
}

/// A text table: a header row and body rows of cells.
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

/// Separator between two columns.
const GAP: &str = "  ";

impl Table {
    /// A table with these column headings, every column right-aligned.
    pub fn new<I, S>(header: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let header: Vec<String> = header.into_iter().map(Into::into).collect();
        let align = vec![Align::Right; header.len()];
        Table {
            header,
            align,
            rows: Vec::new(),
        }
    }

    /// Left-aligns the first `n` columns (the labels of each row).
    pub fn left(mut self, n: usize) -> Self {
        for a in self.align.iter_mut().take(n) {
            *a = Align::Left;
        }
        self
    }

    /// Sets column `i`'s alignment (ignored beyond the last column).
    pub fn align(mut self, i: usize, align: Align) -> Self {
        if let Some(a) = self.align.get_mut(i) {
            *a = align;
        }
        self
    }

    /// Appends one row; missing cells are blank, cells beyond the header are dropped.
    pub fn row<I, S>(&mut self, cells: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut row: Vec<String> = cells
            .into_iter()
            .take(self.header.len())
            .map(Into::into)
            .collect();
        row.resize(self.header.len(), String::new());
        self.rows.push(row);
        self
    }

    /// Number of body rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether the table has no body row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text: the header line, then one line per row, each ending in `\n`.
    pub fn render(&self) -> String {
        self.to_string()
    }

    /// The table in Markdown (reports): `| a | b |` lines, cells unpadded, the alignment row
    /// `|---|---:|` after the header.
    pub fn markdown(&self) -> String {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        let mut out = line(&self.header);
        for a in &self.align {
            out.push_str(match a {
                Align::Left => "|---",
                Align::Right => "|---:",
            });
        }
        out.push_str("|\n");
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = |s: &String| s.chars().count();
        let widths: Vec<usize> = (0..self.header.len())
            .map(|i| {
                self.rows
                    .iter()
                    .map(|r| width(&r[i]))
                    .chain([width(&self.header[i])])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut line = String::new();
        for cells in std::iter::once(&self.header).chain(&self.rows) {
            line.clear();
            for (i, (cell, (&w, a))) in cells.iter().zip(widths.iter().zip(&self.align)).enumerate()
            {
                if i > 0 {
                    line.push_str(GAP);
                }
                let pad = w - width(cell);
                match a {
                    Align::Left => {
                        line.push_str(cell);
                        line.extend(std::iter::repeat_n(' ', pad));
                    }
                    Align::Right => {
                        line.extend(std::iter::repeat_n(' ', pad));
                        line.push_str(cell);
                    }
                }
            }
            writeln!(f, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_by_characters() {
        let mut t = Table::new(["name", "µs", "note"])
            .left(1)
            .align(2, Align::Left);
        t.row(["a", "1.5", "x"]);
        t.row(["long name", "± 12", ""]);
        assert_eq!(
            t.render(),
            "name         µs  note\n\
             a           1.5  x\n\
             long name  ± 12\n"
        );
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.markdown(),
            "| name | µs | note |\n|---|---:|---|\n| a | 1.5 | x |\n| long name | ± 12 |  |\n"
        );
    }

    #[test]
    fn short_and_long_rows_fit_the_header() {
        let mut t = Table::new(["a", "b"]);
        t.row(["1"]);
        t.row(["1", "2", "3"]);
        assert_eq!(t.render(), "a  b\n1\n1  2\n");
        assert!(Table::new(["x"]).is_empty());
        assert_eq!(Table::new(["x"]).render(), "x\n");
    }
}

//! One reading of every metric of a process, typed, and its JSON form (the `METRICS` line).
//!
//! Sources describe what they count once, here; the `METRICS` line and the Prometheus endpoint
//! are two renderings of the same [`Snapshot`], so neither keeps books of its own.

use serde_json::{Map, Value as Json};

/// Where a metric sits: at the top of the line, in a section (`consensus`), or in one member of
/// a labelled section (`stages.verifier`, `channels."verifier->executor"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Group {
    Top,
    Section(&'static str),
    /// `section` is the JSON key (`stages`); `label` is the Prometheus label key and metric
    /// prefix (`stage`); `name` is the member (`verifier`).
    Member {
        section: &'static str,
        label: &'static str,
        name: String,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Only ever grows (a Prometheus counter).
    Counter(f64),
    /// Goes up and down (a Prometheus gauge).
    Gauge(f64),
    /// Counters split by one label (`dropped_by_reason` by `reason`).
    Counts {
        label: &'static str,
        counts: Vec<(String, f64)>,
    },
    /// Text: in the JSON line, and as a label of `hotmove_info` when at the top.
    Text(String),
    /// Structured data for the JSON line only (sample events, latency lists, interval means).
    Json(Json),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub group: Group,
    pub field: String,
    pub value: Value,
}

/// A set of entries being filled by the sources.
#[derive(Debug, Default)]
pub struct Snapshot {
    interval: bool,
    entries: Vec<Entry>,
}

impl Snapshot {
    /// `interval`: this reading is the `METRICS` line's, which also takes the values that cover
    /// one interval (means and maxima since the previous line, events since then). A scrape
    /// passes `false` and leaves them for the line.
    pub fn new(interval: bool) -> Self {
        Snapshot {
            interval,
            entries: Vec::new(),
        }
    }

    pub fn takes_interval(&self) -> bool {
        self.interval
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn top(&mut self) -> Scope<'_> {
        self.scope(Group::Top)
    }

    pub fn section(&mut self, section: &'static str) -> Scope<'_> {
        self.scope(Group::Section(section))
    }

    pub fn member(
        &mut self,
        section: &'static str,
        label: &'static str,
        name: impl Into<String>,
    ) -> Scope<'_> {
        self.scope(Group::Member {
            section,
            label,
            name: name.into(),
        })
    }

    fn scope(&mut self, group: Group) -> Scope<'_> {
        let interval = self.interval;
        Scope {
            snapshot: self,
            group,
            interval,
        }
    }

    /// The JSON object of the `METRICS` line, in the order the entries were added.
    pub fn to_json(&self) -> Map<String, Json> {
        let mut line = Map::new();
        for entry in &self.entries {
            let object = match &entry.group {
                Group::Top => &mut line,
                Group::Section(section) => object_at(&mut line, section),
                Group::Member { section, name, .. } => {
                    object_at(object_at(&mut line, section), name)
                }
            };
            object.insert(entry.field.clone(), json_of(&entry.value));
        }
        line
    }
}

fn json_of(value: &Value) -> Json {
    match value {
        // Whole counts print as integers, as the harness and people expect.
        Value::Counter(v) | Value::Gauge(v) => number(*v),
        Value::Counts { counts, .. } => Json::Object(
            counts
                .iter()
                .map(|(key, v)| (key.clone(), number(*v)))
                .collect(),
        ),
        Value::Text(text) => Json::String(text.clone()),
        Value::Json(json) => json.clone(),
    }
}

fn number(v: f64) -> Json {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        Json::from(v as i64)
    } else {
        Json::from(v)
    }
}

fn object_at<'a>(parent: &'a mut Map<String, Json>, key: &str) -> &'a mut Map<String, Json> {
    let slot = parent
        .entry(key.to_string())
        .or_insert_with(|| Json::Object(Map::new()));
    if !slot.is_object() {
        *slot = Json::Object(Map::new());
    }
    match slot {
        Json::Object(map) => map,
        _ => unreachable!("made an object just above"),
    }
}

/// Adds entries to one group of a snapshot.
pub struct Scope<'a> {
    snapshot: &'a mut Snapshot,
    group: Group,
    interval: bool,
}

impl Scope<'_> {
    /// Whether values that cover one interval are to be taken (see [`Snapshot::new`]).
    pub fn takes_interval(&self) -> bool {
        self.interval
    }

    fn push(&mut self, field: &str, value: Value) -> &mut Self {
        self.snapshot.entries.push(Entry {
            group: self.group.clone(),
            field: field.to_string(),
            value,
        });
        self
    }

    pub fn counter(&mut self, field: &str, value: f64) -> &mut Self {
        self.push(field, Value::Counter(value))
    }

    pub fn gauge(&mut self, field: &str, value: f64) -> &mut Self {
        self.push(field, Value::Gauge(value))
    }

    pub fn counts(
        &mut self,
        field: &str,
        label: &'static str,
        counts: Vec<(String, f64)>,
    ) -> &mut Self {
        self.push(field, Value::Counts { label, counts })
    }

    pub fn text(&mut self, field: &str, text: impl Into<String>) -> &mut Self {
        self.push(field, Value::Text(text.into()))
    }

    pub fn json(&mut self, field: &str, json: Json) -> &mut Self {
        self.push(field, Value::Json(json))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_nests_sections_and_members() {
        let mut snapshot = Snapshot::new(true);
        snapshot.top().text("role", "node").gauge("time_ms", 5.0);
        snapshot.section("consensus").counter("committed_txs", 7.0);
        snapshot
            .member("stages", "stage", "executor")
            .counter("items", 3.0)
            .gauge("batch_size_mean", 1.5)
            .counts("dropped_by_reason", "reason", vec![("stale".into(), 2.0)]);
        snapshot
            .member("stages", "stage", "verifier")
            .counter("items", 4.0);
        let line = Json::Object(snapshot.to_json());
        assert_eq!(
            line,
            json!({
                "role": "node",
                "time_ms": 5,
                "consensus": {"committed_txs": 7},
                "stages": {
                    "executor": {"items": 3, "batch_size_mean": 1.5, "dropped_by_reason": {"stale": 2}},
                    "verifier": {"items": 4},
                },
            })
        );
    }
}

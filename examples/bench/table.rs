//! `--markdown [FILE]`: turns a run's JSON lines (FILE, or stdin) into the
//! README's performance table, with a column of torchdata figures quoted
//! from issue 14 (measured elsewhere, not by this run).

use std::io::Read;

use serde_json::Value;

use crate::Res;

/// torchdata 0.11 on the same machine type (2 vCPUs), measured 2026-11-30
/// and quoted in issue 14, keyed by case (and variant).
const TORCHDATA: &[(&str, &str)] = &[
    ("seq_chain", "1.99 M items/s"),
    ("restore_cost K=1000000", "38.6 ms (linear in K)"),
    ("weighted_mix", "1.80 M items/s"),
    (
        "state_every_batch",
        "7.3 µs per `state_dict`, ratio 0.87 (1.15× slower)",
    ),
    (
        "parallel_cpu",
        "0.41 (threads); 1.66 (process pool, chunks of 256)",
    ),
    (
        "prefetch",
        "35× slower than without prefetch (not against a channel)",
    ),
];

/// Prints the table for the JSON lines in `path` (stdin if `None`).
pub(crate) fn print(path: Option<&str>) -> Res<()> {
    let text = match path {
        Some(path) => std::fs::read_to_string(path)?,
        None => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text)?;
            text
        }
    };
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if !line.starts_with('{') {
            continue;
        }
        let value: Value =
            serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        lines.push(value);
    }
    println!("{}", render(&lines));
    Ok(())
}

fn render(lines: &[Value]) -> String {
    let mut out = String::new();
    for run in lines.iter().filter(|l| l["case"] == "run") {
        out.push_str(&format!(
            "Run: {}; available parallelism {}; load average {} at the start, {} at the end; {} s.\n\n",
            if run["quick"] == true {
                "BENCH_QUICK"
            } else {
                "full"
            },
            run["available_parallelism"],
            text(&run["loadavg_start"]),
            text(&run["loadavg_end"]),
            run["elapsed_s"],
        ));
    }
    out.push_str(
        "| case | nodes | baseline | ratio | target | met | torchdata 0.11 (measured elsewhere) |\n",
    );
    out.push_str("| --- | --- | --- | --- | --- | --- | --- |\n");
    for line in lines.iter().filter(|l| !l["ratio"].is_null()) {
        let case = text(&line["case"]);
        let name = match line["variant"].as_str() {
            Some(variant) => format!("{case} {variant}"),
            None => case.clone(),
        };
        let torchdata = TORCHDATA
            .iter()
            .find(|(key, _)| *key == name)
            .map_or("–", |(_, figure)| figure);
        let (nodes, baseline) = figures(&case, line);
        let ratio = match line["ratio_is_upper_bound"].as_bool() {
            Some(true) => format!("≤ {}", line["ratio"]),
            _ => line["ratio"].to_string(),
        };
        let met = match line["met"].as_bool() {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "n/a",
        };
        out.push_str(&format!(
            "| `{name}` | {nodes} | {baseline} | {ratio} | {} | {met} | {torchdata} |\n",
            target(&case, line),
        ));
    }
    // Times, not ratios.
    for line in lines
        .iter()
        .filter(|l| l["case"] == "restore_in_file" || l["case"] == "restore_in_gzip_file")
    {
        let met = match line["met"].as_bool() {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "n/a",
        };
        let target = match line["target"].as_f64() {
            Some(t) => format!("≤ {}", duration(t * 1e9)),
            None => "–".into(),
        };
        out.push_str(&format!(
            "| `{}` | {} restore at the end of a {:.0} MB file | – | – | {target} | {met} | – |\n",
            text(&line["case"]),
            duration(line["restore_s"].as_f64().unwrap_or(f64::NAN) * 1e9),
            line["file_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        ));
    }
    out
}

/// What each case's baseline is, in a few words.
const BASELINES: &[(&str, &str)] = &[
    ("seq_chain", "iterator chain"),
    ("state_every_batch", "no states"),
    ("seq_chain_stats", "stats off"),
    ("parallel_io", "inline map"),
    ("parallel_cpu", "inline map"),
    ("weighted_mix", "hand-written draw"),
    ("realistic", "hand-written"),
    ("realistic_par", "0 workers"),
    ("realistic_prefetch", "no prefetch, same step"),
    ("realistic_state", "no states"),
    ("read_jsonl", "hand-written BufReader + serde_json"),
];

/// The nodes and baseline columns.
fn figures(case: &str, line: &Value) -> (String, String) {
    let unit = line["unit"].as_str().unwrap_or("items");
    let rate = |key: &str| rate(line[key].as_f64().unwrap_or(0.0), unit);
    let ns = |key: &str| duration(line[key].as_f64().unwrap_or(0.0));
    let per = |key: &str| 1e9 / line[key].as_f64().unwrap_or(f64::INFINITY);
    match case {
        "restore_cost" => (
            format!("{} restore", duration(per("framework_per_s"))),
            format!("{} at K=1000", duration(per("baseline_per_s"))),
        ),
        "prefetch" | "prefetch_inline" => (
            format!("{} per item", ns("framework_ns_per_item")),
            format!(
                "{} per item (crossbeam bounded(16), both threads spinning)",
                ns("spinning_channel_ns_per_item")
            ),
        ),
        "realistic_prefetch_idle" | "realistic_prefetch_idle_inline" => (
            with_inline(rate("framework_per_s"), line),
            match line["hand_written_thread"]["spin_ratio"].as_f64() {
                Some(ceiling) => format!(
                    "{} (no prefetch); the hand-written program on a producer thread: {ceiling} of one thread",
                    rate("baseline_per_s")
                ),
                None => format!("{} (no prefetch)", rate("baseline_per_s")),
            },
        ),
        "reshard" => (
            format!("{} ms per reshard", line["reshard_ms"]),
            format!("{} ms parsing the states", line["parse_ms"]),
        ),
        "reshard_stream" => (
            format!("{} ms per reshard", line["reshard_ms"]),
            "– (JSON parsing excluded)".into(),
        ),
        "realistic_state" => (
            format!("{}, {} per state", rate("framework_per_s"), ns("state_ns")),
            format!("{} (no states)", rate("baseline_per_s")),
        ),
        _ => {
            let baseline = match BASELINES.iter().find(|(c, _)| *c == case) {
                Some((_, what)) => format!("{} ({what})", rate("baseline_per_s")),
                None => rate("baseline_per_s"),
            };
            (with_inline(rate("framework_per_s"), line), baseline)
        }
    }
}

/// `nodes`, with the ratio of the same prefetch in its inline mode
/// (`inline_when_faster()`) where the line has one.
fn with_inline(nodes: String, line: &Value) -> String {
    match line["inline_ratio"].as_f64() {
        Some(inline) => format!("{nodes} (inline_when_faster: ratio {inline})"),
        None => nodes,
    }
}

/// The target column, with its rule where it depends on the machine.
fn target(case: &str, line: &Value) -> String {
    let cores = &line["effective_cores"];
    match (case, line["target"].as_f64()) {
        ("parallel_cpu", Some(t)) => format!("≥ {t:?} (0.85 × {cores} effective cores)"),
        ("realistic_prefetch", None) => {
            format!("≥ 1.4 if effective cores ≥ 1.5 (here {cores}: none)")
        }
        ("realistic_prefetch", Some(t)) => format!("≥ {t:?} ({cores} effective cores)"),
        ("realistic_par", Some(t)) => format!("≥ {t:?} (stage costs allow {})", line["bound"]),
        ("restore_cost", Some(t)) => {
            format!("≥ {t:?} and ≤ {} µs", line["target_restore_us"])
        }
        ("reshard" | "reshard_stream", None) if line["target_ms"].is_number() => {
            format!("≤ {} ms", line["target_ms"])
        }
        (_, Some(t)) => format!("≥ {t:?}"),
        (_, None) => "–".into(),
    }
}

fn rate(per_s: f64, unit: &str) -> String {
    let (value, prefix) = if per_s >= 1e6 {
        (per_s / 1e6, "M ")
    } else if per_s >= 1e3 {
        (per_s / 1e3, "k ")
    } else {
        (per_s, "")
    };
    let digits = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.digits$} {prefix}{unit}/s")
}

/// A duration in nanoseconds, in the unit that suits it.
fn duration(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.1} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "?".into(),
        other => other.to_string(),
    }
}

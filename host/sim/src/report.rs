//! `--report FILE.html`: one self-contained page with the run's summary, plots drawn as
//! inline SVG (pods and nodes over time, cost per hour, how long pods waited), the
//! expectations and the event log.

use crate::run::Report;
use plotters::prelude::*;
use std::fmt::Write;
use std::sync::Once;

fn register_font() {
    static FONT: Once = Once::new();
    FONT.call_once(|| {
        // Plot labels need font metrics; the font travels with the binary.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, epaint_default_fonts::UBUNTU_LIGHT);
    });
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

type Plot = Result<String, Box<dyn std::error::Error>>;

/// A line of the pods-and-nodes plot: label, colour, and the value it reads from a sample.
type Series = (&'static str, RGBColor, fn(&crate::world::Sample) -> usize);

fn minutes(t: i64) -> f64 {
    t as f64 / 60.0
}

/// Points of a step line: a value holds until the next sample changes it.
fn steps(samples: &[crate::world::Sample], f: impl Fn(&crate::world::Sample) -> f64) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(samples.len() * 2);
    for (i, s) in samples.iter().enumerate() {
        if i > 0 {
            out.push((minutes(s.t), f(&samples[i - 1])));
        }
        out.push((minutes(s.t), f(s)));
    }
    out
}

fn pods_and_nodes(r: &Report) -> Plot {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 320)).into_drawing_area();
        root.fill(&WHITE)?;
        let end = minutes(r.duration_seconds).max(1.0);
        let top = r.samples.iter().map(|s| (s.pending_pods + s.running_pods).max(s.nodes)).max().unwrap_or(1).max(1)
            as f64
            * 1.1;
        let mut c = ChartBuilder::on(&root)
            .caption("Pods and nodes", ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..end, 0f64..top)?;
        c.configure_mesh().x_desc("minutes").y_desc("count").draw()?;
        let series: [Series; 3] = [
            ("running pods", GREEN, |s| s.running_pods),
            ("pending pods", RED, |s| s.pending_pods),
            ("nodes", BLUE, |s| s.nodes),
        ];
        for (label, color, f) in series {
            c.draw_series(LineSeries::new(steps(&r.samples, |s| f(s) as f64), color.stroke_width(2)))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        c.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        root.present()?;
    }
    Ok(svg)
}

fn cost(r: &Report) -> Plot {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 260)).into_drawing_area();
        root.fill(&WHITE)?;
        let end = minutes(r.duration_seconds).max(1.0);
        let top = r.samples.iter().map(|s| s.cost_per_hour).fold(0.01, f64::max) * 1.1;
        let mut c = ChartBuilder::on(&root)
            .caption("Cost per hour (USD; spot prices are a model)", ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..end, 0f64..top)?;
        c.configure_mesh().x_desc("minutes").y_desc("$/h").draw()?;
        c.draw_series(LineSeries::new(steps(&r.samples, |s| s.cost_per_hour), BLUE.stroke_width(2)))?;
        root.present()?;
    }
    Ok(svg)
}

fn pending(r: &Report) -> Plot {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 260)).into_drawing_area();
        root.fill(&WHITE)?;
        let bucket = 10u32;
        let max = r.pending_seconds.iter().copied().max().unwrap_or(0).max(60) as u32 + bucket;
        let mut counts = std::collections::BTreeMap::new();
        for &p in &r.pending_seconds {
            *counts.entry(p as u32 / bucket * bucket).or_insert(0u32) += 1;
        }
        let top = counts.values().copied().max().unwrap_or(1) as f64 * 1.1;
        let mut c = ChartBuilder::on(&root)
            .caption("How long pods waited for a node (seconds)", ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(50)
            .build_cartesian_2d((0u32..max).into_segmented(), 0f64..top)?;
        c.configure_mesh().x_desc("seconds pending").y_desc("pods").draw()?;
        c.draw_series(
            Histogram::vertical(&c)
                .style(BLUE.mix(0.6).filled())
                .margin(1)
                .data(counts.iter().map(|(k, v)| (*k, *v as f64))),
        )?;
        root.present()?;
    }
    Ok(svg)
}

/// The report page.
pub fn html(r: &Report) -> Result<String, String> {
    register_font();
    let e = |p: Plot| p.map_err(|e| format!("drawing the report: {e}"));
    let (a, b, c) = (e(pods_and_nodes(r))?, e(cost(r))?, e(pending(r))?);
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>tenon simulate: {name}</title>\
         <style>body{{font-family:sans-serif;max-width:960px;margin:2em auto;color:#222}}table{{border-collapse:collapse}}\
         td,th{{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left}}.fail{{color:#b00}}.ok{{color:#070}}\
         pre{{font-size:12px;background:#f6f6f6;padding:1em;overflow-x:auto}}</style></head><body>\
         <h1>{name}</h1>",
        name = escape(&r.scenario)
    );
    let p = |v: Option<i64>| v.map_or("–".to_string(), |x| format!("{x} s"));
    let _ = write!(
        s,
        "<table><tr><th>virtual time</th><td>{} min</td></tr><tr><th>NodeClaims created</th><td>{}</td></tr>\
         <tr><th>disruptions</th><td>{}</td></tr><tr><th>total cost</th><td>${:.4}</td></tr><tr><th>cost at the end</th><td>${:.4}/h</td></tr>\
         <tr><th>pod wait p50 / max</th><td>{} / {}</td></tr></table>",
        r.duration_seconds / 60,
        r.nodeclaims_created,
        r.disruptions,
        r.total_cost,
        r.final_cost_per_hour,
        p(r.pending_p50_seconds),
        p(r.pending_max_seconds)
    );
    let _ = write!(s, "<h2>Over time</h2>{a}{b}<h2>Waiting</h2>{c}<h2>Expectations</h2>");
    if r.failures.is_empty() {
        let _ = write!(s, "<p class=\"ok\">{} checked, all held.</p>", r.expectations_checked);
    } else {
        for f in &r.failures {
            let _ = write!(s, "<p class=\"fail\">FAILED {}</p>", escape(f));
        }
    }
    let _ = write!(s, "<h2>Events</h2><pre>");
    for ev in &r.events {
        let _ = writeln!(
            s,
            "{}  {:<24} {:<44} {}",
            crate::world::World::describe_time(ev.t),
            escape(&ev.reason),
            escape(&ev.object),
            escape(&ev.message)
        );
    }
    let _ = write!(s, "</pre></body></html>");
    Ok(s)
}

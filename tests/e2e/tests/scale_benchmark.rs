//! The scale benchmark (`cargo run -p tenon-e2e --bin scale`) at a size the test suite can
//! afford: it must run through its waves and measure every figure it reports. It asserts no
//! timings (a benchmark measures); `docs/benchmarks.md` holds the figures at 10,000 pods.

use std::time::Duration;
use tenon_e2e::scale::{self, Options};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scale_benchmark_runs_its_waves_and_measures_them() {
    let opts = Options {
        pods: 40,
        waves: 2,
        steady: Duration::from_secs(3),
        pod_cpu_millis: 1500,
        timeout: Duration::from_secs(180),
        brownout_percent: 0,
    };
    let report = scale::run(&opts, |line| eprintln!("[scale] {line}")).await;
    assert_eq!(report.waves.len(), 2);
    assert!(report.peak_rss_mib > 1.0, "{report:?}");
    assert!(report.rss_growth > 0.0 && report.rss_growth.is_finite(), "{report:?}");
    for w in &report.waves {
        // Ten 1500m pods fit a 16-vCPU node: forty pods are four nodes (Tenon may pick
        // larger or spread, never fewer).
        assert!(w.nodeclaims >= 4, "{w:?}");
        assert!(w.decisions >= 1, "{w:?}");
        for (name, v) in [
            ("batch close to last NodeClaim", w.batch_close_to_last_nodeclaim_seconds),
            ("first pod to first launch", w.first_pod_to_first_launch_seconds),
            ("first batch close to first launch", w.first_batch_close_to_first_launch_seconds),
            ("all bound", w.all_bound_seconds),
            ("teardown", w.teardown_seconds),
        ] {
            assert!(v.is_finite() && v >= 0.0, "{name}: {v} in {w:?}");
        }
        assert!(w.steady_passes_per_second > 0.0, "{w:?}");
        assert!(w.steady_cpu_seconds_per_pass.is_finite(), "{w:?}");
        assert!(w.steady_cpu_seconds_per_second.is_finite(), "{w:?}");
        // At least one CreateFleet and one describe of what it launched.
        assert!(w.ec2_calls >= 2.0 && w.ec2_attempts >= w.ec2_calls, "{w:?}");
        assert!(w.ec2_calls_per_node > 0.0 && w.ec2_calls_per_node.is_finite(), "{w:?}");
        assert!(w.rss_mib > 1.0, "{w:?}");
    }
}

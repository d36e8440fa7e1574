//! The journey docs/policy-authoring.md promises a platform team, run as written: a new
//! policy scaffolded, built and tested, pushed to a registry and named by a NodePool in three
//! commands, with a real registry (CNCF distribution) on 127.0.0.1 and the controller pulling
//! it. References the controller must refuse (a bare tag, a digest the registry does not
//! have) leave the NodePool `PolicyUnavailable` with the reason.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use tenon_e2e::scenario::{apply_lab_general, nodeclass_ready};
use tenon_e2e::{Cluster, eventually, tenon_bin};
use tenon_oci::test_registry::TestRegistry;

/// Runs `tenon ARGS` in `dir`; its stdout, or the test fails with its output.
fn tenon(dir: &PathBuf, args: &[&str]) -> String {
    // Scaffolded crates share one target directory, so the SDK is compiled once per run.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("tenon-e2e-target"))
        .join("scaffolded");
    let o = Command::new(tenon_bin()).args(args).current_dir(dir).env("CARGO_TARGET_DIR", target).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "tenon {args:?}:\n{stdout}{stderr}");
    stdout.into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaffold_to_deployed_in_three_commands_through_a_registry() {
    let registry = TestRegistry::start("journey");
    let mut c = Cluster::start("policy-journey").await;
    c.controller_env.push(("TENON_POLICY_OCI_CACHE".into(), c.dir.join("oci").display().to_string()));
    // The trust policy allows this registry's platform/ repositories (none by default).
    c.controller_env.push(("TENON_POLICY_OCI_SOURCES".into(), format!("{}/platform", registry.addr)));
    apply_lab_general(&c);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;

    // 1–2: scaffold; build, test its fixtures and push.
    let work = c.dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let started = Instant::now();
    tenon(&work, &["policy", "new", "team-scorer", "--kind", "scorer"]);
    let tag = format!("oci://{}/platform/team-scorer:v1", registry.addr);
    let built = tenon(&work, &["policy", "build", "team-scorer", "--push", &tag]);
    eprintln!("scaffold → built, tested and pushed in {:.1} s", started.elapsed().as_secs_f64());
    assert!(built.contains(" passed, 0 failed"), "the scaffold's fixtures ran: {built}");
    let annotate = built
        .lines()
        .find_map(|l| l.strip_prefix("deploy:  "))
        .unwrap_or_else(|| panic!("build prints the command that deploys: {built}"));
    let pin = annotate.split_whitespace().find(|w| w.starts_with("tenon.dev/scoring-policy=oci://")).unwrap();
    assert!(pin.contains(&format!("{}/platform/team-scorer@sha256:", registry.addr)), "{pin}");

    // 3: the printed command, with the NodePool's name.
    // The condition was already True before the annotation (no policy named), so True alone
    // could be read before the controller saw the change: wait for the pull as well.
    c.kubectl(&["annotate", "nodepool", "lab-general", pin, "--overwrite"]);
    let reason =
        eventually(Duration::from_secs(30), "the controller pulled it and the NodePool is healthy", || async {
            let (status, reason, _) = c.nodepool_condition("lab-general", "PolicyHealthy").await?;
            (c.controller_log().contains("policy pulled") && status == "True").then_some(reason)
        })
        .await;
    assert_eq!(reason, "PolicyHealthy");

    // A bare tag is refused unless tags are allowed; nothing is pulled for it.
    c.kubectl(&["annotate", "nodepool", "lab-general", &format!("tenon.dev/scoring-policy={tag}"), "--overwrite"]);
    let (reason, message) = c.await_nodepool_condition("lab-general", "PolicyHealthy", "False").await;
    assert_eq!(reason, "PolicyUnavailable");
    assert!(message.contains("the trust policy refuses tags"), "{message}");

    // A repository outside the trust policy: refused, naming the rule.
    let outside = format!("oci://{}/team/team-scorer@sha256:{}", registry.addr, "1".repeat(64));
    c.kubectl(&["annotate", "nodepool", "lab-general", &format!("tenon.dev/scoring-policy={outside}"), "--overwrite"]);
    let message = eventually(Duration::from_secs(30), "the untrusted source is reported", || async {
        let (_, _, message) = c.nodepool_condition("lab-general", "PolicyHealthy").await?;
        message.contains("not an allowed source").then_some(message)
    })
    .await;
    assert!(message.contains("policies.trust.ociSources") && message.contains(&outside), "{message}");

    // A digest the registry does not have: unavailable, with the registry's answer.
    let absent = format!("oci://{}/platform/team-scorer@sha256:{}", registry.addr, "0".repeat(64));
    c.kubectl(&["annotate", "nodepool", "lab-general", &format!("tenon.dev/scoring-policy={absent}"), "--overwrite"]);
    let message = eventually(Duration::from_secs(30), "the failed pull is reported", || async {
        let (_, _, message) = c.nodepool_condition("lab-general", "PolicyHealthy").await?;
        message.contains("the last pull failed").then_some(message)
    })
    .await;
    assert!(message.contains(&absent), "{message}");

    // Back to the pin: served from the cache, no pull needed.
    c.kubectl(&["annotate", "nodepool", "lab-general", pin, "--overwrite"]);
    c.await_nodepool_condition("lab-general", "PolicyHealthy", "True").await;
    c.assert_controller_running();
}

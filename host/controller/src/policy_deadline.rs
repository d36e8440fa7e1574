//! `--policy-deadline-ms` for the commands that run policies outside the controller.

/// How long a policy call may take.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct PolicyDeadline {
    /// Wall-clock milliseconds a policy call may take before the built-in decision is used
    /// (the controller's default; a loaded machine may need more to measure rather than time
    /// out).
    #[arg(long = "policy-deadline-ms", env = "TENON_POLICY_DEADLINE_MS",
          default_value_t = tenon_policy::Limits::default().deadline_ms,
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub ms: u64,
}

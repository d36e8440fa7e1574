//! `tenon policy push` and `tenon policy pull`: policies in OCI registries.

use anyhow::{Context, bail};
use std::path::Path;
use tenon_api::policy::{OciSource, PolicyRef};
use tenon_oci::{Options, Registry};
use tenon_policy::oci_cache::OciCache;
use tenon_policy::{Limits, PolicyEngine};

fn oci(reference: &str) -> anyhow::Result<OciSource> {
    let r = PolicyRef::parse(reference).map_err(anyhow::Error::msg)?;
    r.oci.with_context(|| format!("{reference}: not an OCI reference (write oci://REGISTRY/REPOSITORY:TAG)"))
}

/// The user's credentials for `src`'s registry only (see [`Options::cli_credentials`]).
fn registry(src: &OciSource, insecure: &[String]) -> anyhow::Result<Registry> {
    let credentials = Options::cli_credentials(&src.registry)?;
    Ok(Registry::new(Options { insecure: insecure.to_vec(), credentials, ..Options::default() })?)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?)
}

/// Pushes a policy component to a tag and returns the pinned reference.
pub fn push(wasm: &Path, reference: &str, insecure: &[String]) -> anyhow::Result<String> {
    let dest = oci(reference)?;
    if dest.tag.is_none() || dest.digest.is_some() {
        bail!("{reference}: push to a tag (oci://REGISTRY/REPOSITORY:TAG); the digest that pins it is printed");
    }
    let bytes = std::fs::read(wasm).with_context(|| format!("reading {}", wasm.display()))?;
    // Only policies are pushed: a file that is not one fails here, not in the cluster.
    let engine = PolicyEngine::new(Limits::default(), None)?;
    engine.load(&dest.repository, &bytes).with_context(|| format!("{} is not a Tenon policy", wasm.display()))?;
    let digest = runtime()?.block_on(registry(&dest, insecure)?.push(&bytes, &dest))?;
    let pinned = OciSource { tag: None, digest: Some(digest), ..dest };
    Ok(pinned.to_string())
}

/// Pulls a reference into this user's OCI cache (what `tenon simulate` and `tenon check`
/// read `oci://` references from) and returns the component's file.
pub fn pull(reference: &str, insecure: &[String]) -> anyhow::Result<std::path::PathBuf> {
    let src = oci(reference)?;
    let dir = OciCache::default_dir().context("no cache directory: set HOME or XDG_CACHE_HOME")?;
    let cache = OciCache::new(dir);
    let pulled = runtime()?.block_on(registry(&src, insecure)?.pull(&src, false))?;
    cache.put(&src, &pulled.digest, &pulled.manifest, &pulled.component, &[])?;
    let pinned = OciSource { digest: Some(pulled.digest), tag: None, ..src };
    cache.component_path(&pinned).context("the pulled component's path")
}

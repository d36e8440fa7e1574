//! The controller image `scripts/image` builds: a valid OCI archive (every digest and size
//! checks out), a non-root user and `tenon` as entrypoint, the reference the chart deploys by
//! default, and a root filesystem whose own loader and libraries run the binary it holds.
//! Where podman is installed, the image is also loaded and run.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use tenon_e2e::{run_tool, tenon_bin};

fn sha256(path: &Path) -> String {
    let out = run_tool("sha256sum", &[path.to_str().unwrap()], &[]);
    format!("sha256:{}", out.split_whitespace().next().unwrap())
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// The blob a descriptor names, after checking its digest and size.
fn blob(layout: &Path, desc: &Value) -> PathBuf {
    let digest = desc["digest"].as_str().expect("a descriptor has a digest");
    let path = layout.join("blobs/sha256").join(digest.trim_start_matches("sha256:"));
    assert_eq!(sha256(&path), digest, "blob {} holds what its digest says", path.display());
    assert_eq!(std::fs::metadata(&path).unwrap().len(), desc["size"].as_u64().unwrap(), "size of {digest}");
    path
}

/// The image the chart's Deployment names with default values.
fn chart_image() -> String {
    let rendered = run_tool(
        "helm",
        &[
            "template",
            "tenon",
            "charts/tenon",
            "--set",
            "settings.clusterName=lab",
            "--show-only",
            "templates/deployment.yaml",
        ],
        &[],
    );
    let deployment: Value = serde_yaml::from_str(&rendered).unwrap();
    deployment["spec"]["template"]["spec"]["containers"][0]["image"].as_str().unwrap().to_string()
}

#[test]
fn the_image_is_a_valid_oci_archive_whose_binary_runs() {
    let dir = std::env::temp_dir().join(format!("tenon-image-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let archive = dir.join("tenon.oci.tar");
    let bin = tenon_bin();
    run_tool("scripts/image", &["--binary", bin.to_str().unwrap(), "--output", archive.to_str().unwrap()], &[]);

    let layout = dir.join("layout");
    std::fs::create_dir_all(&layout).unwrap();
    run_tool("tar", &["-xf", archive.to_str().unwrap(), "-C", layout.to_str().unwrap()], &[]);
    assert_eq!(json(&layout.join("oci-layout"))["imageLayoutVersion"], "1.0.0");
    let index = json(&layout.join("index.json"));
    let manifests = index["manifests"].as_array().unwrap();
    assert_eq!(manifests.len(), 1, "one image: {index}");
    assert_eq!(manifests[0]["mediaType"], "application/vnd.oci.image.manifest.v1+json");
    assert_eq!(
        manifests[0]["annotations"]["org.opencontainers.image.ref.name"].as_str(),
        Some(chart_image().as_str()),
        "the chart's default image is the one scripts/image builds"
    );
    let manifest = json(&blob(&layout, &manifests[0]));
    assert_eq!(manifest["config"]["mediaType"], "application/vnd.oci.image.config.v1+json");
    let config = json(&blob(&layout, &manifest["config"]));
    assert_eq!((config["os"].as_str(), config["architecture"].as_str()), (Some("linux"), Some("amd64")));
    let user = config["config"]["User"].as_str().unwrap();
    assert_eq!(user, "65532:65532", "the chart's runAsUser, not root");
    assert_eq!(config["config"]["Entrypoint"], serde_json::json!(["/usr/local/bin/tenon"]));
    assert_eq!(config["config"]["Cmd"], serde_json::json!(["controller"]));

    // One gzip layer whose uncompressed digest is the config's diff_id.
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1);
    assert_eq!(layers[0]["mediaType"], "application/vnd.oci.image.layer.v1.tar+gzip");
    let layer = blob(&layout, &layers[0]);
    let tar = dir.join("layer.tar");
    let out = Command::new("gzip").arg("-dc").arg(&layer).output().unwrap();
    assert!(out.status.success(), "the layer is gzip");
    std::fs::write(&tar, &out.stdout).unwrap();
    assert_eq!(config["rootfs"]["diff_ids"][0].as_str(), Some(sha256(&tar).as_str()));

    let rootfs = dir.join("rootfs");
    std::fs::create_dir_all(&rootfs).unwrap();
    run_tool("tar", &["-xf", tar.to_str().unwrap(), "-C", rootfs.to_str().unwrap()], &[]);
    for shell in ["bin/sh", "usr/bin/sh", "bin/bash"] {
        assert!(!rootfs.join(shell).exists(), "no shell in the image: {shell}");
    }
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap();
    assert!(passwd.lines().any(|l| l.split(':').nth(2) == Some("65532")), "user 65532 is named: {passwd}");
    assert!(rootfs.join("etc/ssl/certs/ca-certificates.crt").metadata().unwrap().len() > 0, "CA bundle");

    // Run the image's binary with the image's own loader and libraries only.
    let loader = rootfs.join("lib64/ld-linux-x86-64.so.2");
    let libs = ["lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64"]
        .map(|d| rootfs.join(d).to_string_lossy().into_owned())
        .join(":");
    let run = |args: &[&str]| {
        let out = Command::new(&loader)
            .args(["--inhibit-cache", "--library-path", &libs])
            .arg(rootfs.join("usr/local/bin/tenon"))
            .args(args)
            .env_clear()
            .output()
            .unwrap();
        assert!(out.status.success(), "tenon {args:?} in the image: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The loader falls back to this machine's directories for what the image lacks: check
    // that every library resolves inside the image.
    let list = Command::new(&loader)
        .args(["--inhibit-cache", "--library-path", &libs, "--list"])
        .arg(rootfs.join("usr/local/bin/tenon"))
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    for line in list.lines().filter(|l| l.contains("=>")) {
        let resolved = line.split("=>").nth(1).unwrap().split_whitespace().next().unwrap_or("");
        assert!(resolved.starts_with(rootfs.to_str().unwrap()), "resolved outside the image: {line}");
    }
    let version = run(&["--version"]);
    assert_eq!(version.trim(), format!("tenon {}", env!("CARGO_PKG_VERSION")));
    assert!(run(&["controller", "--help"]).contains("--cluster-name"), "the image's binary has the controller");

    if Command::new("podman").arg("--version").output().is_ok_and(|o| o.status.success()) {
        let image = manifests[0]["annotations"]["org.opencontainers.image.ref.name"].as_str().unwrap();
        run_tool("podman", &["load", "-i", archive.to_str().unwrap()], &[]);
        let out = run_tool("podman", &["run", "--rm", image, "--version"], &[]);
        assert_eq!(out.trim(), version.trim());
    } else {
        eprintln!("podman is not installed here: the image was checked by unpacking it, not run by a runtime");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

//! Runs the emulator until interrupted and prints a kubeconfig for it (for poking at it with
//! kubectl by hand).

fn main() {
    let emu = match tenon_kube_emulator::Emulator::start() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("kube-emulator: cannot listen on 127.0.0.1: {e}");
            std::process::exit(1);
        }
    };
    print!("{}", emu.kubeconfig());
    eprintln!("kube-emulator: serving on {} (Ctrl-C to stop)", emu.url);
    loop {
        std::thread::park();
    }
}

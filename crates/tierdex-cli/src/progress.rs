//! Progress bars (hidden when stderr is not a terminal).

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar over `total` units (bytes when `bytes`), or a spinner when unknown.
pub fn bar(total: Option<u64>, bytes: bool, prefix: &str) -> ProgressBar {
    let pb = match total {
        Some(t) => ProgressBar::new(t),
        None => ProgressBar::new_spinner(),
    };
    pb.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
    let template = match (total.is_some(), bytes) {
        (true, true) => "{prefix:>9} [{bar:30}] {bytes}/{total_bytes} ({eta}) {msg}",
        (true, false) => "{prefix:>9} [{bar:30}] {pos}/{len} ({eta}) {msg}",
        (false, _) => "{prefix:>9} {spinner} {elapsed} {msg}",
    };
    pb.set_style(
        ProgressStyle::with_template(template)
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_prefix(prefix.to_string());
    pb.enable_steady_tick(Duration::from_millis(250));
    pb
}

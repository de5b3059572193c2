//! How a SQLite connection waits for another connection's write lock. SQLite's own busy handler (what
//! `busy_timeout` installs) sleeps 1, 2, 5, 10, 15, 20, 25... ms between attempts, so a write that finds the
//! lock taken for 50 us waits at least a millisecond, and two or three unlucky attempts put a send's commit 8-18
//! ms late. Every pool here (data, main and queue files) installs [`short_waits`] instead: the same give-up
//! time, polled in steps that start at 10 us and grow to 1 ms.

use std::ffi::{c_int, c_void};
use std::time::Duration;

use sqlx::SqliteConnection;

/// How long a connection keeps trying before the statement fails with `SQLITE_BUSY`.
const GIVE_UP_AFTER: Duration = Duration::from_secs(10);

/// The pause before attempt `attempt` (0-based): 10 us doubling every 4 attempts, capped at 1 ms.
fn pause(attempt: u32) -> Duration {
    let micros = 10u64 << (attempt / 4).min(7);
    Duration::from_micros(micros.min(1_000))
}

/// The attempt from which every pause is the 1 ms cap.
const CAPPED_FROM: u32 = 28;

/// Total time spent pausing before attempt `attempt`.
fn waited(attempt: u32) -> Duration {
    let short = (0..attempt.min(CAPPED_FROM)).map(pause).sum::<Duration>();
    short + pause(CAPPED_FROM) * attempt.saturating_sub(CAPPED_FROM)
}

/// SQLite's busy callback: non-zero means "try again". Runs on the connection's own thread (sqlx gives
/// each SQLite connection one), so sleeping blocks nothing else.
extern "C" fn on_busy(_: *mut c_void, attempt: c_int) -> c_int {
    let attempt = u32::try_from(attempt).unwrap_or(u32::MAX);
    if waited(attempt) >= GIVE_UP_AFTER {
        return 0;
    }
    std::thread::sleep(pause(attempt));
    1
}

/// Replaces the connection's busy handler with [`on_busy`]. For `SqlitePoolOptions::after_connect`.
pub async fn short_waits(conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
    let mut handle = conn.lock_handle().await?;
    // SAFETY: the handle is locked (no statement runs on it meanwhile) and outlives the call; `on_busy` is a
    // plain function that neither unwinds nor reads its argument, so a null argument is fine.
    let rc = unsafe {
        libsqlite3_sys::sqlite3_busy_handler(
            handle.as_raw_handle().as_ptr(),
            Some(on_busy),
            std::ptr::null_mut(),
        )
    };
    if rc == libsqlite3_sys::SQLITE_OK {
        Ok(())
    } else {
        Err(sqlx::Error::Protocol(format!(
            "sqlite3_busy_handler failed with code {rc}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_from_ten_micros_to_a_millisecond() {
        assert_eq!(pause(0), Duration::from_micros(10));
        assert_eq!(pause(4), Duration::from_micros(20));
        assert_eq!(pause(CAPPED_FROM - 1), Duration::from_micros(640));
        assert_eq!(pause(CAPPED_FROM), Duration::from_millis(1));
        assert_eq!(pause(5_000), Duration::from_millis(1));
    }

    #[test]
    fn gives_up_after_about_ten_seconds() {
        let attempts = (0..20_000).find(|a| waited(*a) >= GIVE_UP_AFTER);
        // 28 short attempts (5 ms in all) then one per millisecond.
        assert_eq!(attempts, Some(10_023));
    }
}

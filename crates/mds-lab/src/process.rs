//! Child processes that cannot outlive the process that started them (a test, or `mds lab`).
//!
//! Three layers, because no single one covers every way a process ends:
//! - `PR_SET_PDEATHSIG` (Linux) makes the kernel SIGKILL a child when the thread that forked it
//!   exits, which covers `kill -9` of the parent. The signal follows the forking *thread*, not
//!   the process, and libtest runs each test on a thread that ends with the test; so every
//!   child is forked by one spawner thread that lives as long as the process.
//! - [`ManagedChild`] kills and reaps its process on drop, which covers panics and scoped use.
//! - An `atexit` hook kills whatever is still registered and removes registered folders, which
//!   covers a control plane held in a `static` (statics are never dropped) and `exit()` calls.

use std::collections::BTreeSet;
use std::io;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc;
use std::sync::{Mutex, Once, OnceLock};
use std::thread;

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Process ids of live managed children, killed at exit.
static LIVE_CHILDREN: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());
/// Folders to remove at exit (data folders of control planes never dropped).
static EXIT_FOLDERS: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());
static AT_EXIT: Once = Once::new();

/// A child process that is killed and reaped when dropped, and at process exit at the latest.
#[derive(Debug)]
pub struct ManagedChild {
    child: Child,
    name: String,
}

impl ManagedChild {
    /// Spawns `command` from the process-lifetime spawner thread, with the death signal set.
    pub fn spawn(name: &str, mut command: Command) -> io::Result<ManagedChild> {
        register_at_exit();
        set_death_signal(&mut command);
        let (reply_tx, reply_rx) = mpsc::channel();
        spawner()
            .send((command, reply_tx))
            .map_err(|_| io::Error::other("the mds-lab spawner thread is gone"))?;
        let child = reply_rx
            .recv()
            .map_err(|_| io::Error::other("the mds-lab spawner thread dropped a request"))??;
        lock(&LIVE_CHILDREN).insert(child.id());
        Ok(ManagedChild {
            child,
            name: name.to_string(),
        })
    }

    /// Like [`ManagedChild::spawn`], in a process group of its own, so that killing it kills
    /// the processes it started too (a vLLM server's engine core).
    pub fn spawn_group(name: &str, mut command: Command) -> io::Result<ManagedChild> {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
        ManagedChild::spawn(name, command)
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The exit status if the process has ended, without waiting.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        // Errors mean it has already ended (and maybe been reaped); either way it is gone.
        kill_group(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
        lock(&LIVE_CHILDREN).remove(&self.child.id());
    }
}

impl Drop for ManagedChild {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Removes `folder` at process exit unless [`forget_folder_at_exit`] was called first.
pub fn remove_folder_at_exit(folder: PathBuf) {
    register_at_exit();
    lock(&EXIT_FOLDERS).insert(folder);
}

pub fn forget_folder_at_exit(folder: &PathBuf) {
    lock(&EXIT_FOLDERS).remove(folder);
}

/// Whether a process with this id exists and is not a zombie (a killed child whose new parent
/// has not reaped it yet is dead for our purposes).
pub fn process_is_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name, which may contain spaces.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding these locks leaves plain sets behind, still usable.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn spawner() -> &'static mpsc::Sender<SpawnRequest> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        thread::Builder::new()
            .name("mds-lab-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
                // The sender lives in a static, so this is not reached; if it were, ending the
                // thread would kill every child through the death signal, so stay.
                loop {
                    thread::park();
                }
            })
            .expect("cannot start the mds-lab spawner thread");
        tx
    })
}

#[cfg(target_os = "linux")]
fn set_death_signal(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and calls only async-signal-safe
    // functions (prctl, getppid, _exit); it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl; then no signal will come.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn set_death_signal(_command: &mut Command) {}

/// SIGKILLs the process group led by `pid`, if it leads one (a child spawned with
/// [`ManagedChild::spawn_group`]); otherwise no group has that id and nothing happens.
fn kill_group(pid: u32) {
    // SAFETY: a plain syscall; a negative id names a process group.
    unsafe {
        libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
    }
}

fn register_at_exit() {
    AT_EXIT.call_once(|| {
        // SAFETY: registering a plain `extern "C"` function with no arguments.
        unsafe {
            libc::atexit(clean_up_at_exit);
        }
    });
}

extern "C" fn clean_up_at_exit() {
    // try_lock: a thread killed while holding a lock must not hang the exit.
    if let Ok(children) = LIVE_CHILDREN.try_lock() {
        for &pid in children.iter() {
            // SAFETY: plain syscalls on our own children's ids.
            kill_group(pid);
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
                libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
            }
        }
    }
    if let Ok(folders) = EXIT_FOLDERS.try_lock() {
        for folder in folders.iter() {
            let _ = std::fs::remove_dir_all(folder);
        }
    }
}

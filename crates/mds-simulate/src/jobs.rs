//! Independent runs spread over the machine's cores. Each job's result lands at its own index,
//! so the output is the same whatever the number of threads or the order they finish in.

use std::sync::Mutex;

/// A unit of work.
pub type Job<'a, T> = Box<dyn FnOnce() -> T + Send + 'a>;

/// Runs `jobs` on `threads` threads (at least one); results in the jobs' order. `done` hears
/// the share finished after each job.
pub fn run<'a, T: Send>(
    threads: usize,
    jobs: Vec<Job<'a, T>>,
    done: &(dyn Fn(f64) + Sync),
) -> Vec<T> {
    let total = jobs.len();
    let queue: Mutex<Vec<(usize, Job<'a, T>)>> =
        Mutex::new(jobs.into_iter().enumerate().rev().collect());
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..total).map(|_| None).collect());
    let finished = Mutex::new(0_usize);
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, total.max(1)) {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
                    let Some((index, job)) = next else {
                        break;
                    };
                    let result = job();
                    results.lock().unwrap_or_else(|e| e.into_inner())[index] = Some(result);
                    let mut n = finished.lock().unwrap_or_else(|e| e.into_inner());
                    *n += 1;
                    done(*n as f64 / total.max(1) as f64);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_keep_the_jobs_order_whatever_the_threads() {
        for threads in [1, 2, 7] {
            let jobs: Vec<super::Job<'_, usize>> = (0..20_usize)
                .map(|i| Box::new(move || i * i) as super::Job<'_, usize>)
                .collect();
            let out = super::run(threads, jobs, &|_| {});
            assert_eq!(out, (0..20).map(|i| i * i).collect::<Vec<_>>());
        }
        assert!(super::run::<u8>(2, Vec::new(), &|_| {}).is_empty());
    }
}

//! Subgroups (`Comm::split`, `Comm::mesh`): numbering by color and key,
//! and a tensor-parallel and a data-parallel group driven from two threads
//! of every rank at once, with exact results every round. On the emulator
//! by default (CI); on GPU ranks with `SYMM_KERNEL_TESTS_ON=gpu`, where
//! the two groups take turns from one thread (GPUs cannot yet run two
//! groups' waiting kernels at once: `Comm::split`).

use std::time::Duration;

#[path = "support/targets.rs"]
mod targets;
#[path = "support/tier.rs"]
mod tier;
use targets::{on_gpu, ranks};

use symm::dsl::*;
use symm::kernels::all_reduce::all_reduce;
use symm::kernels::collectives::all_gather;
use symm::{run, symm_kernel, CommOptions, LaunchConfig};

fn options() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(30))
}

/// Colors `rank % 3` (none for the last rank) and keys that reverse the
/// order: each subgroup numbers its ranks by key, and an all-gather of
/// every member's rank in this group comes back in that order.
#[test]
fn split_numbers_by_key_then_rank() {
    if !tier::quick_test() {
        return;
    }
    let world = 8;
    let Some(ranks) = ranks(world) else { return };
    let got = run(ranks, options(), |c| {
        let color = (c.rank() + 1 < world).then_some(c.rank() as u32 % 3);
        // Keys tie in pairs, so ties fall back to the rank.
        let key = (world - c.rank()) as u32 / 2;
        let Some(sub) = c.split(color, key)? else {
            return Ok(None);
        };
        let buf = sub.alloc::<u32>(1)?;
        buf.copy_from_host(&[c.rank() as u32])?;
        let s = buf.rendezvous()?;
        let mut out = sub.device_buffer::<u32>(sub.world_size())?;
        all_gather(&sub, &s, &mut out, 1)?;
        sub.synchronize()?;
        Ok(Some((sub.rank(), sub.world_size(), out.to_host()?)))
    })
    .unwrap();
    for (r, g) in got.iter().enumerate() {
        if r + 1 == world {
            assert!(g.is_none(), "rank {r} passed no color");
            continue;
        }
        let mut members: Vec<usize> = (0..world - 1).filter(|p| p % 3 == r % 3).collect();
        members.sort_by_key(|&p| ((world - p) / 2, p));
        let (sub_rank, sub_world, gathered) = g.as_ref().expect("rank {r} has a subgroup");
        assert_eq!(*sub_world, members.len(), "rank {r}'s subgroup size");
        assert_eq!(members[*sub_rank], r, "rank {r}'s number in its subgroup");
        let want: Vec<u32> = members.iter().map(|&p| p as u32).collect();
        assert_eq!(gathered[..], want[..], "rank {r}'s all-gather");
    }
}

/// The value rank `global` contributes at element `i` of round `k`: small
/// integers, so every sum is exact in f32.
fn value(k: usize, global: usize, i: usize) -> f32 {
    ((k * 7 + global * 13 + i * 3) % 97) as f32
}

/// `rounds` all-reduces on the row group (tensor parallel) in one thread
/// and as many all-gathers on the column group (data parallel) in another,
/// on every rank at once, each result checked exactly, every round.
fn mesh_case(world: usize, rows: usize, rounds: usize) {
    let Some(ranks) = ranks(world) else { return };
    let cols = world / rows;
    let n = 37;
    run(ranks, options(), |c| {
        let (tp, dp) = c.mesh(rows)?;
        let me = c.rank();
        let (row, col) = (me / cols, me % cols);
        assert_eq!((tp.rank(), tp.world_size()), (col, cols));
        assert_eq!((dp.rank(), dp.world_size()), (row, rows));
        let tp_round = |buf: &symm::SymmBuffer<f32>,
                        s: &symm::SymmetricMemory,
                        out: &mut symm::DeviceBuffer<f32>,
                        k: usize|
         -> symm::Result<()> {
            let mine: Vec<f32> = (0..n).map(|i| value(k, me, i)).collect();
            buf.copy_from_host(&mine)?;
            all_reduce(&tp, s, out, n)?;
            let got = out.to_host()?;
            for (i, g) in got.iter().enumerate() {
                let want: f32 = (0..cols).map(|p| value(k, row * cols + p, i)).sum();
                assert_eq!(
                    *g, want,
                    "world {world}, rank {me}, TP round {k}, element {i}"
                );
            }
            Ok(())
        };
        let dp_round = |buf: &symm::SymmBuffer<f32>,
                        s: &symm::SymmetricMemory,
                        out: &mut symm::DeviceBuffer<f32>,
                        k: usize|
         -> symm::Result<()> {
            let mine: Vec<f32> = (0..n).map(|i| -value(k, me, i)).collect();
            buf.copy_from_host(&mine)?;
            all_gather(&dp, s, out, n)?;
            let got = out.to_host()?;
            for (j, g) in got.iter().enumerate() {
                let want = -value(k, (j / n) * cols + col, j % n);
                assert_eq!(
                    *g, want,
                    "world {world}, rank {me}, DP round {k}, element {j}"
                );
            }
            Ok(())
        };
        let (tp_buf, dp_buf) = (tp.alloc::<f32>(n)?, dp.alloc::<f32>(n)?);
        let (tp_s, dp_s) = (tp_buf.rendezvous()?, dp_buf.rendezvous()?);
        let mut tp_out = tp.device_buffer::<f32>(n)?;
        let mut dp_out = dp.device_buffer::<f32>(rows * n)?;
        if on_gpu() {
            for k in 0..rounds {
                tp_round(&tp_buf, &tp_s, &mut tp_out, k)?;
                dp_round(&dp_buf, &dp_s, &mut dp_out, k)?;
            }
            return Ok(());
        }
        std::thread::scope(|scope| {
            let tp_thread = scope.spawn(|| -> symm::Result<()> {
                for k in 0..rounds {
                    tp_round(&tp_buf, &tp_s, &mut tp_out, k)?;
                }
                Ok(())
            });
            let dp_thread = scope.spawn(|| -> symm::Result<()> {
                for k in 0..rounds {
                    dp_round(&dp_buf, &dp_s, &mut dp_out, k)?;
                }
                Ok(())
            });
            tp_thread.join().expect("the TP thread")?;
            dp_thread.join().expect("the DP thread")
        })
    })
    .unwrap_or_else(|e| panic!("world {world}, {rows} rows: {e}"));
}

#[test]
fn meshes_run_tp_and_dp_at_once() {
    // Meshes run in the quick tier through the functional collectives
    // (tests/functional.rs).
    if !tier::full_test("meshes of 4 and 8 ranks") {
        return;
    }
    let rounds = 1000;
    mesh_case(8, 2, rounds);
    mesh_case(8, 4, rounds);
    mesh_case(4, 2, rounds);
}

/// A rank that never calls `split` (it returns): the others fail naming
/// it, at once (fail-fast), instead of hanging.
#[test]
fn a_rank_missing_from_a_split_is_a_timeout() {
    if !tier::quick_test() {
        return;
    }
    let world = 4;
    let Some(ranks) = ranks(world) else { return };
    let short = CommOptions::default().with_timeout(Duration::from_secs(1));
    let e = run(ranks, short, |c| {
        if c.rank() == 1 {
            return Ok(());
        }
        c.split(Some(0), 0).map(|_| ())
    })
    .expect_err("the split must fail");
    assert_eq!(e.errors.len(), world - 1, "{e}");
    for (r, m) in &e.errors {
        let m = m.to_string();
        assert!(*r != 1 && m.contains("rank 1 exited"), "rank {r}: {m}");
    }
}

/// A rank's memory in any of its groups is its memory in every other: a
/// built-in all-reduce of the row group writes into the parent's buffer
/// from the column group's symmetric memory's copy, and `Comm::copy` moves
/// between the groups' buffers. Another rank's memory stays refused, by
/// the copy and by a functional call, whose error names the call, the
/// argument and both ranks' groups, on every rank.
#[test]
fn memory_crosses_a_ranks_groups_and_no_further() {
    if !tier::quick_test() {
        return;
    }
    let world = 4;
    let Some(ranks) = ranks(world) else { return };
    let n = 19;
    let slots: std::sync::Mutex<Vec<Option<symm::DeviceBuffer<f32>>>> =
        std::sync::Mutex::new((0..world).map(|_| None).collect());
    run(ranks, options(), |c| {
        let (tp, dp) = c.mesh(2)?;
        let me = c.rank();
        let mine: Vec<f32> = (0..n).map(|i| (me * 100 + i) as f32).collect();
        // Staged through the parent's buffer into the row group's
        // symmetric memory, by the column group's copy.
        let parent = c.device_buffer_from(&mine)?;
        let row_buf = tp.alloc::<f32>(n)?;
        dp.copy(&parent, &mut row_buf.slice(..)?)?;
        dp.synchronize()?;
        let smem = row_buf.rendezvous()?;
        let mut sum = c.device_buffer_from(&vec![f32::NAN; n])?;
        all_reduce(&tp, &smem, &mut sum, n)?;
        tp.synchronize()?;
        let row = me / 2;
        let want: Vec<f32> = (0..n)
            .map(|i| ((2 * row) * 100 + i) as f32 + ((2 * row + 1) * 100 + i) as f32)
            .collect();
        assert_eq!(
            sum.to_host()?,
            want,
            "rank {me}: the row's sum in the parent's buffer"
        );
        // The column group's symmetric memory (the same rank and world
        // size here) is no symmetric memory of the row group's kernels.
        let col_buf = dp.alloc::<f32>(n)?;
        let col_smem = col_buf.rendezvous()?;
        let e = all_reduce(&tp, &col_smem, &mut sum, n).expect_err("another group's memory");
        // Ranks 1 and 2 hold the column group's other rank number; ranks 0
        // and 3 the same one, which only the group check refuses.
        let m = e.to_string();
        let part = if tp.rank() == dp.rank() {
            format!(
                "symmetric memory of group {}, and this launch runs on group {}",
                dp.group_label(),
                tp.group_label()
            )
        } else {
            "argument `input` is rank".to_string()
        };
        assert!(m.contains(&part), "rank {me}: {part:?} in {m}");
        // Another rank's buffer (the next rank's, same device or not).
        slots.lock().unwrap()[me] = Some(c.device_buffer_from(&mine)?);
        c.host_barrier()?;
        let theirs = slots.lock().unwrap()[(me + 1) % world].take().expect("put");
        c.host_barrier()?;
        let mut out = tp.device_buffer::<f32>(n)?;
        let e = tp
            .copy(&theirs, &mut out)
            .expect_err("another rank's memory");
        let m = e.to_string();
        let other = (me + 1) % world;
        for part in [
            "argument `src`".to_string(),
            format!("memory of rank {other} of group symm,"),
            format!("rank {} of group {}", tp.rank(), tp.group_label()),
        ] {
            assert!(m.contains(&part), "rank {me}: {part:?} in {m}");
        }
        // Through a functional call, the column group's rank 0 passes
        // another rank's memory: every rank of the group fails, naming it.
        let coll = symm::functional::Collectives::new(&dp)?;
        let offender = dp.rank() == 0;
        let input: &dyn symm::functional::Operand<f32> = if offender { &theirs } else { &parent };
        let e = coll
            .all_reduce(input, &mut out, symm::functional::ReduceOp::Sum)
            .map(|_| ())
            .expect_err("another rank's memory, on every rank");
        let m = e.to_string();
        let col = me % 2;
        let part = format!(
            "all_reduce: rank 0 of group symm.split1[{col},{}]: argument `input` is memory of \
             rank {} of group symm, and this runs on rank 0 of group symm.split1[{col},{}]",
            col + 2,
            col + 1,
            col + 2
        );
        assert!(m.contains(&part), "rank {me}: {part:?} in {m}");
        assert!(
            !m.contains("; rank 1 of group symm.split1"),
            "rank {me}: only the offender: {m}"
        );
        drop(theirs);
        c.host_barrier()?;
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Asserts in thread `bad` of block 0 (in none where `bad` is past the
/// block).
#[symm_kernel]
fn asserts_in(out: &mut [u32], bad: u32) {
    let i = thread_idx_x();
    kernel_assert!(i != bad);
    out[i] = i;
}

/// A subgroup's errors name its ranks as its own (`rank 1 of group
/// symm.split0[1,3]`), from the host (an argument check), its backend,
/// and the device (a signal wait's timeout and a failed `kernel_assert!`,
/// which the subgroup's own status record reports): the rank number is
/// the subgroup's, not the parent's.
#[test]
fn a_subgroups_errors_name_its_ranks_as_its_own() {
    if !tier::quick_test() {
        return;
    }
    let world = 4;
    let Some(ranks) = ranks(world) else { return };
    let options = options().with_kernel_timeout(Duration::from_millis(200));
    run(ranks, options, |c| {
        // Groups [0,2] and [1,3]: subgroup rank 1 is parent rank 2 or 3.
        let g = c.split(Some((c.rank() % 2) as u32), 0)?.expect("a color");
        let label = format!("symm.split0[{},{}]", c.rank() % 2, c.rank() % 2 + 2);
        assert_eq!(g.group_label(), label);
        assert_eq!(g.group_name().label(), Some(label.as_str()));
        assert_eq!(c.group_name().label(), None, "the parent's ranks are plain");
        // An argument check: the output is too short, on every rank.
        let s = g.alloc::<f32>(8)?.rendezvous()?;
        let mut short = g.device_buffer::<f32>(4)?;
        let e = all_reduce(&g, &s, &mut short, 8).expect_err("a short output");
        let m = e.to_string();
        let me = format!("rank {} of group {label}: ", g.rank());
        assert!(m.starts_with(&me), "rank {}: {me:?} first in {m}", c.rank());
        assert_eq!(e.group_label(), Some(label.as_str()));
        // What the subgroup's backend reports (an emulated rank has no
        // device memory to report), on the same device as the parent's.
        if !on_gpu() {
            let m = g.mem_info().expect_err("no device memory").to_string();
            assert!(m.starts_with(&me), "rank {}: {me:?} first in {m}", c.rank());
            assert_eq!(g.device(), c.device());
        }
        // A device wait nobody answers: subgroup rank 1 waits on rank 0.
        let ch = symm::signal::Channel::request(&g)?;
        if g.rank() == 1 {
            s.wait_signal(0, &ch, Duration::from_millis(200))?;
            let e = g.synchronize().expect_err("nobody signals");
            assert!(
                matches!(
                    e,
                    symm::Error::SignalTimeout {
                        rank: 1,
                        peer: 0,
                        ..
                    }
                ),
                "{e:?}"
            );
            let m = e.to_string();
            let want = format!("signal timeout: rank 1 of group {label}, block 0, thread 0: ");
            assert!(m.starts_with(&want), "{want:?} first in {m}");
            // The kernel's own record (the rank the launch gave it).
            let mut out = g.device_buffer::<u32>(32)?;
            // (The emulator's launch fails; a GPU's next synchronisation.)
            let e = asserts_in::launch(&g, LaunchConfig::linear(1, 32), &mut out, 5)
                .and_then(|()| g.synchronize())
                .expect_err("thread 5 asserts");
            assert!(
                matches!(
                    e,
                    symm::Error::KernelAssert {
                        rank: 1,
                        thread: 5,
                        ..
                    }
                ),
                "{e:?}"
            );
            let m = e.to_string();
            let want =
                format!("kernel `asserts_in` on rank 1 of group {label}, block 0, thread 5: ");
            assert!(m.starts_with(&want), "{want:?} first in {m}");
        }
        // Rank 0 stays until rank 1 has its answer.
        c.host_barrier()?;
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

/// One allocation of the parent rendezvoused with its row and column
/// groups too (`SymmBuffer::rendezvous_in`): every group's reduction reads
/// it in place, round after round with new data, each exact; each group
/// signals on pads of its own; the functional layer reads it in place for
/// a group it was rendezvoused with; and a pool tensor, which is its
/// segment's memory, is refused.
#[test]
fn one_allocation_rendezvoused_with_several_groups() {
    use symm::kernels::collectives::{all_reduce_op, ReduceOp};
    for world in [4, 8] {
        if !tier::runs(world == 4) {
            continue;
        }
        let Some(ranks) = ranks(world) else { return };
        let n = 37;
        let rows = 2;
        let value = |g: usize, round: usize, i: usize| (g * 1000 + round * 31 + i) as i64 - 500;
        run(ranks, options(), |c| {
            let (tp, dp) = c.mesh(rows)?;
            let me = c.rank();
            let buf = c.alloc_unpooled::<i64>(n)?;
            let whole = buf.rendezvous()?;
            let in_tp = buf.rendezvous_in(&tp)?;
            let in_dp = buf.rendezvous_in(&dp)?;
            assert!(
                std::sync::Arc::ptr_eq(&buf.rendezvous_in(&tp)?, &in_tp),
                "cached"
            );
            assert_eq!(in_tp.world_size(), tp.world_size());
            assert_ne!(
                in_tp.signal_pad_ptrs(),
                whole.signal_pad_ptrs(),
                "pads of its own"
            );
            assert_ne!(
                in_tp.signal_pad_ptrs(),
                in_dp.signal_pad_ptrs(),
                "pads of its own"
            );
            // The parent ranks of this rank's row and column groups.
            let members = |g: &symm::Comm| -> symm::Result<Vec<usize>> {
                let ids = g.device_buffer_from(&[me as u64])?;
                let mut all = g.device_buffer::<u64>(g.world_size())?;
                let s = g.alloc::<u64>(1)?;
                g.copy(&ids, &mut s.slice(..)?)?;
                all_gather(g, &*s.rendezvous()?, &mut all, 1)?;
                Ok(all.to_host()?.into_iter().map(|v| v as usize).collect())
            };
            let (tp_ranks, dp_ranks) = (members(&tp)?, members(&dp)?);
            let sum = |of: &[usize], round: usize| -> Vec<i64> {
                (0..n)
                    .map(|i| of.iter().map(|&g| value(g, round, i)).sum())
                    .collect()
            };
            let everyone: Vec<usize> = (0..world).collect();
            let (mut a, mut b, mut d) = (
                c.device_buffer::<i64>(n)?,
                c.device_buffer::<i64>(n)?,
                c.device_buffer::<i64>(n)?,
            );
            for round in 0..20 {
                let mine: Vec<i64> = (0..n).map(|i| value(me, round, i)).collect();
                buf.copy_from_host(&mine)?;
                // Each group's call waits for the last one's: the groups'
                // streams are their own, and GPUs do not run two groups'
                // waiting kernels at once (`Comm::split`).
                all_reduce_op(&tp, &in_tp, &mut a, n, ReduceOp::Sum)?;
                tp.synchronize()?;
                all_reduce_op(&dp, &in_dp, &mut b, n, ReduceOp::Sum)?;
                dp.synchronize()?;
                all_reduce_op(c, &whole, &mut d, n, ReduceOp::Sum)?;
                c.synchronize()?;
                assert_eq!(
                    a.to_host()?,
                    sum(&tp_ranks, round),
                    "row sum, round {round}"
                );
                assert_eq!(
                    b.to_host()?,
                    sum(&dp_ranks, round),
                    "column sum, round {round}"
                );
                assert_eq!(
                    d.to_host()?,
                    sum(&everyone, round),
                    "sum of all, round {round}"
                );
            }
            // A buffer of the column group, rendezvoused with the row group
            // too: its id in its own group may equal the parent buffer's,
            // and it is still another allocation.
            let other = dp.alloc_unpooled::<i64>(n)?;
            let other_in_tp = other.rendezvous_in(&tp)?;
            assert_ne!(other_in_tp.alloc_id(), in_tp.alloc_id());
            other.copy_from_host(&vec![me as i64; n])?;
            all_reduce_op(&tp, &other_in_tp, &mut a, n, ReduceOp::Sum)?;
            tp.synchronize()?;
            let want = vec![tp_ranks.iter().map(|&g| g as i64).sum::<i64>(); n];
            assert_eq!(a.to_host()?, want, "a column buffer summed over the row");
            // The functional layer reads it in place for the row group.
            let coll = symm::functional::Collectives::new(&tp)?;
            let got = coll
                .all_reduce(&buf, tp.device_buffer::<i64>(n)?, ReduceOp::Max)?
                .wait_host()?
                .to_host()?;
            let last: Vec<i64> = (0..n)
                .map(|i| tp_ranks.iter().map(|&g| value(g, 19, i)).max().unwrap())
                .collect();
            assert_eq!(got, last, "functional max over the row");
            // A pool tensor is its segment's memory.
            let pool = c.pool();
            let guard = c.use_pool(&pool)?;
            let t = c.alloc::<f32>(8)?;
            drop(guard);
            let e = t.rendezvous_in(&tp).expect_err("a pool tensor");
            assert_eq!(e.kind(), symm::ErrorKind::Unsupported, "{e}");
            assert!(e.to_string().contains("alloc_unpooled"), "{e}");
            // One rank's pool tensor fails every rank of the row at once
            // (not at the timeout), naming that rank.
            let plain = c.alloc_unpooled::<f32>(8)?;
            let mixed = if tp.rank() == 0 { &t } else { &plain };
            let start = std::time::Instant::now();
            let e = mixed
                .rendezvous_in(&tp)
                .expect_err("one rank's pool tensor");
            assert!(start.elapsed() < Duration::from_secs(10), "{e}");
            assert_eq!(e.kind(), symm::ErrorKind::Unsupported, "{e}");
            let label = tp.group_label();
            assert!(
                e.to_string()
                    .contains(&format!("rank 0 of group {label}: it passed a pool tensor")),
                "{e}"
            );
            Ok(())
        })
        .unwrap_or_else(|e| panic!("world {world}: {e}"));
    }
}

/// Simulated nodes split a group into NVLink domains of consecutive ranks
/// (`CommOptions::nodes`, `SYMM_NODES`): every rank learns its domain and
/// index in it; symmetric memory and kernels on the whole group are
/// refused on every rank, pointing to `domain()`; `domain()` and `rails()`
/// are the intra-domain and same-index groups, and symm's collectives run
/// inside a domain as usual. Bad node counts fail the group's creation.
#[test]
fn simulated_nodes_make_domains_and_rails() {
    let cases = if tier::quick_test() {
        vec![(4, 2), (8, 4)]
    } else {
        vec![(8, 2), (6, 3), (3, 2)]
    };
    for (world, nodes) in cases {
        let Some(ranks) = ranks(world) else { continue };
        run(ranks, options().with_nodes(nodes), |c| {
            let me = c.rank();
            let t = c.topology().clone();
            let node = me * nodes / world;
            let mates: Vec<usize> = (0..world).filter(|&r| r * nodes / world == node).collect();
            let local = mates.iter().position(|&r| r == me).expect("in its node");
            assert_eq!(t.domains(), nodes, "{t}");
            assert_eq!((t.domain_of(me), t.local_rank(me)), (node, local), "{t}");
            assert_eq!(t.ranks_of(node), mates);
            // Nothing is mapped across domains, on every rank alike.
            let e = c
                .alloc::<f32>(8)?
                .rendezvous()
                .expect_err("the group spans domains");
            assert_eq!(e.kind(), symm::ErrorKind::Unsupported, "{e}");
            let m = e.to_string();
            for part in ["spans NVLink domains", "comm.domain()", &t.to_string()] {
                assert!(m.contains(part), "rank {me}: {part:?} in {m}");
            }
            let mut out = c.device_buffer::<u32>(32)?;
            let e = asserts_in::launch(c, LaunchConfig::linear(1, 32), &mut out, 99)
                .expect_err("a kernel on a group that spans domains");
            assert!(e.to_string().contains("kernel `asserts_in`"), "{e}");
            // The domain: symm's collectives as on any group.
            let d = c.domain()?;
            assert_eq!((d.rank(), d.world_size()), (local, mates.len()));
            assert!(!d.topology().spans_domains());
            let n = 37;
            let mine: Vec<f32> = (0..n).map(|i| value(i, me, 0)).collect();
            let s = d.alloc::<f32>(n)?;
            s.copy_from_host(&mine)?;
            let s = s.rendezvous()?;
            let mut sum = d.device_buffer_from(&vec![f32::NAN; n])?;
            all_reduce(&d, &s, &mut sum, n)?;
            d.synchronize()?;
            let want: Vec<f32> = (0..n)
                .map(|i| mates.iter().map(|&r| value(i, r, 0)).sum())
                .collect();
            assert_eq!(sum.to_host()?, want, "rank {me}: the domain's sum");
            // The rail: one rank of each domain, by domain; it spans them.
            let r = c.rails()?;
            let rail: Vec<usize> = (0..world).filter(|&q| t.local_rank(q) == local).collect();
            assert_eq!((r.rank(), r.world_size()), (node, rail.len()));
            assert_eq!(r.topology().spans_domains(), rail.len() > 1);
            // Asked again, the same groups (no new split).
            assert_eq!(c.domain()?.group_label(), d.group_label());
            assert_eq!(c.rails()?.group_label(), r.group_label());
            c.host_barrier()?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("world {world}, {nodes} nodes: {e}"));
    }
    // No nodes, or more than ranks: every rank's creation fails.
    if !tier::quick_test() {
        return;
    }
    for nodes in [0, 5] {
        let Some(ranks) = ranks(4) else { return };
        let e = run(ranks, options().with_nodes(nodes), |_| Ok(())).expect_err("a bad node count");
        assert_eq!(e.errors.len(), 4, "{e}");
        for (_, m) in &e.errors {
            assert!(
                m.to_string()
                    .contains(&format!("{nodes} simulated nodes for 4 ranks")),
                "{m}"
            );
        }
    }
}

//! Where a group's ranks run, and what ranks that share a GPU may launch.
//!
//! Every CUDA rank publishes its device's identity when it joins a group
//! ([`DeviceId`]); every rank then derives the same [`Placement`] from the
//! same entries. Ranks that share a GPU must be threads of one process: the
//! kernels of different processes take turns on a GPU (without MPS), so
//! kernels that wait on each other would only time out.
//!
//! **Co-residency.** A kernel that waits on peers finishes only if the
//! peers' kernels run at the same time. Ranks on different GPUs always do;
//! ranks that share a GPU do only if all their blocks fit on it at once. A
//! GPU holds `blocks_per_sm × SMs` blocks of one kernel (the driver's
//! occupancy figure, measured exact on an H100 by `scripts/probes`). With
//! programmatic dependent launch, a rank's next kernel can become resident
//! while its current one still runs, so each rank may use at most half of
//! its share: `blocks_per_sm × SMs / (2 × ranks on the GPU)` blocks
//! ([`Placement::co_resident_blocks`]).

use crate::error::{Error, Result};

pub(crate) use crate::cuda::CONNECTIONS_VAR;

/// Whether `share` ranks on one GPU each get a hardware work queue of their
/// own, given the value of [`CONNECTIONS_VAR`] (`None`: unset, the driver's
/// 8). Streams that share a queue start their work in the order it was
/// submitted, so a rank's kernel can sit behind another rank's kernel that
/// waits for it, until that one times out. One queue more than ranks: the
/// runtime holds one idle stream per device.
pub(crate) fn check_queues(share: usize, var: Option<&str>) -> std::result::Result<(), String> {
    let queues = var
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(8);
    if share > 1 && queues < share + 1 {
        return Err(format!(
            "{share} ranks share a GPU, which needs {} hardware work queues, but \
             {CONNECTIONS_VAR}{} gives {queues}: ranks whose streams share a queue run their \
             kernels in submission order, so a kernel waiting for a peer could block that \
             peer's kernel until it timed out; set {CONNECTIONS_VAR}=32 in the environment \
             that starts the program, or call symm::prepare_shared_gpus() first thing in main",
            share + 1,
            var.map_or(" unset".to_string(), |v| format!("={v}")),
        ));
    }
    Ok(())
}

/// What a CUDA rank publishes about its device when it joins a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DeviceId {
    /// The device's UUID: the same GPU has the same one in every process.
    pub uuid: [u8; 16],
    /// The rank's process id (for messages: ids of different PID
    /// namespaces can be equal).
    pub pid: u32,
    /// A random number of the rank's process, the same for all its ranks:
    /// what tells processes apart.
    pub process: u64,
    /// The device's ordinal in that process.
    pub ordinal: u32,
    /// Multiprocessors.
    pub sms: u32,
    /// Compute capability.
    pub arch: (u32, u32),
    /// What NVLink domain the device is in, as far as the machine says:
    /// [`machine_domain`] (ranks of one host map each other's memory), or
    /// [`FABRIC_DOMAIN`] for every rank of a multi-node NVLink system
    /// (fabric handles).
    pub domain: u64,
    /// The simulated nodes the rank splits its group into
    /// ([`CommOptions::nodes`](crate::CommOptions::nodes); 1 for a
    /// subgroup, which keeps its parent's), the same on every rank.
    pub nodes: u32,
}

/// [`DeviceId::domain`] of a rank that shares memory by fabric handles:
/// one NVLink domain across hosts, where IMEX is provisioned.
pub(crate) const FABRIC_DOMAIN: u64 = u64::MAX;

const DEVICE_ID_VERSION: u8 = 3;
const DEVICE_ID_BYTES: usize = 1 + 16 + 8 + 4 * 5 + 8 + 4;

impl DeviceId {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(DEVICE_ID_BYTES);
        v.push(DEVICE_ID_VERSION);
        v.extend_from_slice(&self.uuid);
        v.extend_from_slice(&self.process.to_le_bytes());
        for w in [self.pid, self.ordinal, self.sms, self.arch.0, self.arch.1] {
            v.extend_from_slice(&w.to_le_bytes());
        }
        v.extend_from_slice(&self.domain.to_le_bytes());
        v.extend_from_slice(&self.nodes.to_le_bytes());
        v
    }

    pub(crate) fn decode(v: &[u8]) -> Option<DeviceId> {
        if v.len() != DEVICE_ID_BYTES || v[0] != DEVICE_ID_VERSION {
            return None;
        }
        let word = |i: usize| {
            let at = 25 + 4 * i;
            u32::from_le_bytes([v[at], v[at + 1], v[at + 2], v[at + 3]])
        };
        Some(DeviceId {
            uuid: v[1..17].try_into().ok()?,
            process: u64::from_le_bytes(v[17..25].try_into().ok()?),
            pid: word(0),
            ordinal: word(1),
            sms: word(2),
            arch: (word(3), word(4)),
            domain: u64::from_le_bytes(v[45..53].try_into().ok()?),
            nodes: u32::from_le_bytes(v[53..57].try_into().ok()?),
        })
    }

    /// `GPU-xxxxxxxx-xxxx-…`, as `nvidia-smi -L` prints it.
    fn uuid_string(&self) -> String {
        let h: Vec<String> = self.uuid.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "GPU-{}-{}-{}-{}-{}",
            h[..4].concat(),
            h[4..6].concat(),
            h[6..8].concat(),
            h[8..10].concat(),
            h[10..].concat()
        )
    }
}

/// A random number for this process, the same for all its ranks.
pub(crate) fn process_token() -> u64 {
    static TOKEN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TOKEN.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        // RandomState is seeded from the OS's randomness once per process.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.finish()
    })
}

/// A number for this machine's current boot, the same in every process on
/// it: the kernel's boot id, folded (read once a process). Where the
/// kernel does not say, this process's own token: each such process counts
/// as a host of its own (its ranks keep their own ledger) rather than all
/// of them as one.
pub(crate) fn host_token() -> u64 {
    static TOKEN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TOKEN.get_or_init(|| {
        let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
        let hex: String = id.chars().filter(char::is_ascii_hexdigit).collect();
        let half = |s: &str| u64::from_str_radix(s, 16).unwrap_or(0);
        match hex.len() {
            32 => half(&hex[..16]) ^ half(&hex[16..]),
            _ => process_token(),
        }
    })
}

/// This machine as [`DeviceId::domain`] names it: the kernel's boot id
/// (folded), else the host name's hash, else 0. Never a per-process
/// number: processes of one host must land in one domain.
pub(crate) fn machine_domain() -> u64 {
    static TOKEN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TOKEN.get_or_init(|| {
        let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
        let hex: String = id.chars().filter(char::is_ascii_hexdigit).collect();
        if hex.len() == 32 {
            let half = |s: &str| u64::from_str_radix(s, 16).unwrap_or(0);
            return half(&hex[..16]) ^ half(&hex[16..]);
        }
        let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        // FNV-1a: the same in every process (std's hasher is seeded).
        name.trim().bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    })
}

/// Which ranks of a group share a device, as every rank of the group sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    /// For each rank, the index of its device among the group's devices
    /// (in order of first appearance).
    device_of: Vec<usize>,
    /// Multiprocessors of the group's smallest device.
    min_sms: u32,
    /// The most ranks on one device (kept: launches read it).
    share: usize,
    /// For each rank, its device's [`DeviceId::domain`] (0 on the
    /// emulator, which has one machine).
    domains: Vec<u64>,
}

impl Placement {
    /// Every rank alone on its device (the emulator, and groups of one).
    pub(crate) fn alone(world: usize) -> Placement {
        Placement {
            device_of: (0..world).collect(),
            min_sms: 0,
            share: 1,
            domains: vec![0; world],
        }
    }

    /// The placement that `ids` (one per rank, in rank order) describe, or
    /// the message every rank reports when it is not allowed.
    pub(crate) fn resolve(ids: &[DeviceId]) -> std::result::Result<Placement, String> {
        if let Some(other) = ids.iter().position(|i| i.nodes != ids[0].nodes) {
            return Err(format!(
                "the ranks split the group into different numbers of simulated nodes (rank 0: \
                 {}, rank {other}: {}): set SYMM_NODES (or CommOptions::nodes) alike on every \
                 rank",
                ids[0].nodes, ids[other].nodes
            ));
        }
        // The group's devices, each with the first rank on it.
        let mut devices: Vec<([u8; 16], usize)> = Vec::new();
        let mut device_of = Vec::with_capacity(ids.len());
        for (r, id) in ids.iter().enumerate() {
            match devices.iter().position(|(uuid, _)| *uuid == id.uuid) {
                Some(d) => {
                    let first = devices[d].1;
                    if ids[first].process != id.process {
                        return Err(format!(
                            "ranks {first} and {r} run in different processes (pids {} and {}) on \
                             the same GPU {} (cuda:{} and cuda:{} in them): kernels of different \
                             processes do not run at the same time without MPS, so kernels that \
                             wait on each other would only time out; give each process its own \
                             GPU (check LOCAL_RANK and CUDA_VISIBLE_DEVICES), or run ranks that \
                             share a GPU as threads of one process (symm::run with \
                             Ranks::Cuda(vec![0, 0]))",
                            ids[first].pid,
                            id.pid,
                            id.uuid_string(),
                            ids[first].ordinal,
                            id.ordinal
                        ));
                    }
                    device_of.push(d);
                }
                None => {
                    devices.push((id.uuid, r));
                    device_of.push(devices.len() - 1);
                }
            }
        }
        let share = (0..device_of.len())
            .map(|r| device_of.iter().filter(|&&d| d == device_of[r]).count())
            .max()
            .unwrap_or(1);
        let placement = Placement {
            device_of,
            min_sms: ids.iter().map(|i| i.sms).min().unwrap_or(0),
            share,
            domains: ids.iter().map(|i| i.domain).collect(),
        };
        if placement.share() > 1 {
            if let Some(other) = ids.iter().position(|i| i.arch != ids[0].arch) {
                return Err(format!(
                    "ranks share GPUs, which needs every GPU of the group to be of one \
                     architecture (rank 0 has sm_{}{}, rank {other} sm_{}{}): the built-in \
                     kernels size their grids to what fits on a shared GPU, and every rank must \
                     pick the same grid",
                    ids[0].arch.0, ids[0].arch.1, ids[other].arch.0, ids[other].arch.1
                ));
            }
        }
        Ok(placement)
    }

    /// Each rank's NVLink domain as its device says it ([`DeviceId::domain`]).
    pub(crate) fn domains(&self) -> &[u64] {
        &self.domains
    }

    /// The most ranks of this group itself on any one device (not counting
    /// a parent's, as [`share`](Self::share) does): what NCCL, which takes
    /// one rank of a communicator per GPU, asks.
    pub(crate) fn own_share(&self) -> usize {
        (0..self.device_of.len())
            .map(|r| self.ranks_on_device(r))
            .max()
            .unwrap_or(1)
    }

    /// Number of ranks of the group on `rank`'s device, itself included.
    pub(crate) fn ranks_on_device(&self, rank: usize) -> usize {
        let d = self.device_of[rank];
        self.device_of.iter().filter(|&&x| x == d).count()
    }

    /// This placement, counting at least `share` ranks on the busiest
    /// device (a subgroup's, whose parent has more ranks there).
    pub(crate) fn with_min_share(mut self, share: usize) -> Placement {
        self.share = self.share.max(share);
        self
    }

    /// The most ranks of the group on any one device (1 when every rank has
    /// its own). The same on every rank, so grids derived from it agree.
    pub(crate) fn share(&self) -> usize {
        self.share
    }

    /// The largest grid of a kernel that waits on peers, which holds
    /// `blocks_per_sm` blocks per multiprocessor, that every rank of the
    /// group may launch so that all of them are resident at once (module
    /// docs), or `None` when no rank shares its device (no limit).
    pub(crate) fn co_resident_blocks(&self, blocks_per_sm: u32) -> Option<u32> {
        let share = self.share;
        if share <= 1 {
            return None;
        }
        let capacity = u64::from(blocks_per_sm) * u64::from(self.min_sms);
        Some(u32::try_from(capacity / (2 * share as u64)).unwrap_or(u32::MAX))
    }

    /// The most blocks that a built-in kernel that waits on peers takes
    /// where ranks share a device: a quarter of the multiprocessors over
    /// the ranks on the busiest device, at least one, so that with two
    /// kernels a rank (programmatic dependent launch) half of them stay
    /// free; `None` when no rank shares its device.
    pub(crate) fn spread_blocks(&self) -> Option<u32> {
        let share = self.share as u64;
        (share > 1).then(|| {
            u32::try_from((u64::from(self.min_sms) / (4 * share)).max(1)).unwrap_or(u32::MAX)
        })
    }
}

/// Publishes `mine` under this group's keys, waits for every rank's, and
/// resolves the group's placement (the same result, or the same error, on
/// every rank).
pub(crate) fn join(
    rank: usize,
    world: usize,
    store: &dyn crate::Store,
    prefix: &str,
    timeout: std::time::Duration,
    mine: &DeviceId,
) -> Result<Placement> {
    let key = |r: usize| format!("{prefix}/placement/{r}");
    // The subgroup's `Comm` qualifies these errors with its name.
    let group = crate::GroupName::NONE;
    let store_err = |source| Error::Store {
        rank,
        group: group.clone(),
        source,
    };
    store.set(&key(rank), &mine.encode()).map_err(store_err)?;
    let keys: Vec<String> = (0..world).map(key).collect();
    store.wait(&keys, timeout).map_err(|e| match e {
        crate::StoreError::Timeout { missing, .. } => {
            Error::join_timeout(rank, group.clone(), timeout, &missing)
        }
        other => store_err(other),
    })?;
    let mut ids = Vec::with_capacity(world);
    for (r, k) in keys.iter().enumerate() {
        let raw = store.try_get(k).map_err(store_err)?.unwrap_or_default();
        ids.push(
            DeviceId::decode(&raw).ok_or_else(|| Error::InvalidArgument {
                rank,
                group: group.clone(),
                message: format!(
                    "rank {r} joined with an unreadable device entry (a different symm version?)"
                ),
            })?,
        );
    }
    let invalid = |message| Error::InvalidArgument {
        rank,
        group: group.clone(),
        message,
    };
    let placement = Placement::resolve(&ids).map_err(invalid)?;
    let var = crate::cuda::queues_at_start();
    check_queues(placement.share(), var.as_deref()).map_err(invalid)?;
    Ok(placement)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(gpu: u8, pid: u32) -> DeviceId {
        DeviceId {
            uuid: [gpu; 16],
            pid,
            process: u64::from(pid) << 8,
            ordinal: u32::from(gpu),
            sms: 132,
            arch: (9, 0),
            domain: 7,
            nodes: 1,
        }
    }

    #[test]
    fn device_ids_round_trip_and_reject_garbage() {
        let d = DeviceId {
            uuid: *b"0123456789abcdef",
            pid: 4242,
            process: 0x1122_3344_5566_7788,
            ordinal: 3,
            sms: 132,
            arch: (9, 0),
            domain: 0x0102_0304_0506_0708,
            nodes: 2,
        };
        assert_eq!(DeviceId::decode(&d.encode()), Some(d.clone()));
        assert_eq!(DeviceId::decode(&d.encode()[1..]), None);
        let mut v = d.encode();
        v[0] = 9;
        assert_eq!(DeviceId::decode(&v), None);
        assert_eq!(
            id(0xab, 1).uuid_string(),
            "GPU-abababab-abab-abab-abab-abababababab"
        );
    }

    #[test]
    fn shared_devices_are_counted_per_rank_and_for_the_group() {
        // Ranks 0, 1 and 3 on GPU 7; rank 2 on GPU 8.
        let p = Placement::resolve(&[id(7, 1), id(7, 1), id(8, 1), id(7, 1)]).unwrap();
        assert_eq!(
            (0..4).map(|r| p.ranks_on_device(r)).collect::<Vec<_>>(),
            [3, 3, 1, 3]
        );
        assert_eq!(p.share(), 3);
        let own = Placement::resolve(&[id(1, 1), id(2, 1)]).unwrap();
        assert_eq!((own.ranks_on_device(0), own.share()), (1, 1));
        assert_eq!(Placement::alone(4).share(), 1);
    }

    #[test]
    fn one_gpu_in_two_processes_is_the_same_error_for_everyone() {
        let ids = [id(1, 10), id(2, 11), id(1, 12)];
        let e = Placement::resolve(&ids).unwrap_err();
        assert!(
            e.contains("ranks 0 and 2 run in different processes (pids 10 and 12)"),
            "{e}"
        );
        assert!(e.contains("GPU-01010101-0101"), "{e}");
        assert!(e.contains("(cuda:1 and cuda:1 in them)"), "{e}");
        assert!(e.contains("without MPS"), "{e}");
        assert_eq!(Placement::resolve(&ids), Placement::resolve(&ids));
    }

    /// Ranks that split the group into different numbers of simulated
    /// nodes (`SYMM_NODES` set differently) fail alike, naming both.
    #[test]
    fn simulated_nodes_must_agree() {
        let mut two = id(2, 1);
        two.nodes = 2;
        let e = Placement::resolve(&[id(1, 1), two]).unwrap_err();
        assert!(
            e.contains("different numbers of simulated nodes (rank 0: 1, rank 1: 2)"),
            "{e}"
        );
        assert!(Placement::resolve(&[id(1, 1), id(2, 1)]).is_ok());
    }

    #[test]
    fn sharing_needs_one_architecture() {
        let mut other = id(2, 1);
        other.arch = (8, 0);
        // Each rank on its own GPU: mixed architectures are fine.
        assert!(Placement::resolve(&[id(1, 1), other.clone()]).is_ok());
        let e = Placement::resolve(&[id(1, 1), id(1, 1), other]).unwrap_err();
        assert!(e.contains("rank 0 has sm_90, rank 2 sm_80"), "{e}");
    }

    /// `join` on `ids.len()` threads over one in-process store; rank r
    /// publishes `ids[r]` unless it is `None` (a rank that never joins).
    fn join_all(ids: &[Option<DeviceId>]) -> Vec<Result<Placement>> {
        let store = crate::InProcessStore::new();
        std::thread::scope(|s| {
            let handles: Vec<_> = ids
                .iter()
                .enumerate()
                .filter_map(|(r, id)| id.as_ref().map(|id| (r, id)))
                .map(|(r, id)| {
                    let store = &store;
                    s.spawn(move || {
                        join(
                            r,
                            ids.len(),
                            store,
                            "g/1",
                            std::time::Duration::from_millis(300),
                            id,
                        )
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn joining_gives_every_rank_the_same_placement_or_error() {
        let ok = join_all(&[Some(id(1, 7)), Some(id(1, 7)), Some(id(2, 7))]);
        for p in &ok {
            let p = p.as_ref().unwrap();
            assert_eq!(
                (p.share(), p.ranks_on_device(0), p.ranks_on_device(2)),
                (2, 2, 1)
            );
        }
        let bad = join_all(&[Some(id(1, 7)), Some(id(1, 8))]);
        let msgs: Vec<String> = bad
            .iter()
            .map(|r| r.as_ref().unwrap_err().to_string())
            .collect();
        assert!(
            msgs[0].contains("rank 0: invalid argument: ranks 0 and 1 run in different processes")
        );
        assert_eq!(
            msgs[0].split_once(": ").unwrap().1,
            msgs[1].split_once(": ").unwrap().1
        );
        let missing = join_all(&[Some(id(1, 7)), None, Some(id(2, 7))]);
        for r in &missing {
            match r {
                Err(Error::JoinTimeout { missing, .. }) => assert_eq!(missing, &[1]),
                other => panic!("expected a timeout naming rank 1, got {other:?}"),
            }
        }
    }

    #[test]
    fn an_unreadable_entry_is_an_error() {
        let store = crate::InProcessStore::new();
        crate::Store::set(&store, "g/1/placement/1", b"garbage").unwrap();
        let e = join(
            0,
            2,
            &store,
            "g/1",
            std::time::Duration::from_secs(5),
            &id(1, 7),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("rank 1 joined with an unreadable device entry"),
            "{e}"
        );
    }

    #[test]
    fn ranks_sharing_a_gpu_need_a_work_queue_each() {
        assert_eq!(check_queues(8, Some("32")), Ok(()));
        assert_eq!(check_queues(1, Some("1")), Ok(()));
        assert_eq!(check_queues(1, None), Ok(()));
        // Unset (or unreadable) is the driver's 8: enough for 7 ranks.
        assert_eq!(check_queues(7, None), Ok(()));
        let e = check_queues(8, None).unwrap_err();
        assert!(e.contains("8 ranks share a GPU, which needs 9"), "{e}");
        assert!(
            e.contains("CUDA_DEVICE_MAX_CONNECTIONS unset gives 8"),
            "{e}"
        );
        let e = check_queues(2, Some("1")).unwrap_err();
        assert!(e.contains("CUDA_DEVICE_MAX_CONNECTIONS=1 gives 1"), "{e}");
        assert!(check_queues(8, Some("lots")).is_err());
    }

    #[test]
    fn co_resident_blocks_halve_each_ranks_share() {
        let alone = Placement::resolve(&[id(1, 1), id(2, 1)]).unwrap();
        assert_eq!(alone.co_resident_blocks(4), None);
        let mut ids = vec![id(1, 1); 4];
        ids[3].sms = 114; // the smallest device bounds everyone
        let p = Placement::resolve(&ids).unwrap();
        // 4 blocks per SM × 114 SMs, over 2 × 4 ranks.
        assert_eq!(p.co_resident_blocks(4), Some(57));
        assert_eq!(p.co_resident_blocks(1), Some(14));
        assert_eq!(p.co_resident_blocks(0), Some(0));
        // The probe's figures on one H100 (scripts/probes/shared_gpu.cu):
        // 512-thread blocks, 4 per SM: 8 ranks fit 33 blocks each with PDL.
        let h100 = Placement::resolve(&vec![id(1, 1); 8]).unwrap();
        assert_eq!(h100.co_resident_blocks(4), Some(33));
        // The built-in kernels take 132 / (4 × 8) of them, and at least one.
        assert_eq!(h100.spread_blocks(), Some(4));
        assert_eq!(p.spread_blocks(), Some(7));
        assert_eq!(alone.spread_blocks(), None);
        let mut tiny = vec![id(1, 1); 2];
        tiny[0].sms = 1;
        tiny[1].sms = 1;
        assert_eq!(Placement::resolve(&tiny).unwrap().spread_blocks(), Some(1));
    }
}

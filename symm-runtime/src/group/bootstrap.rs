//! Joining a group from a launcher's environment, one process per GPU:
//! torchrun (and `symm-run`), Open MPI's `mpirun`, or Slurm's `srun`.
//!
//! [`Comm::from_env`] reads [`LaunchEnv`], brings up the group's store
//! (rank 0 hosts a [`TcpStore`] at `MASTER_ADDR:MASTER_PORT` and the others
//! connect, or every rank opens a [`FileStore`] in `SYMM_STORE_DIR`; under
//! torchrun, whose agent already listens on `MASTER_PORT`, the port is
//! `MASTER_PORT + 1`, and `SYMM_STORE_PORT` overrides either; every rank
//! presents the token in `SYMM_STORE_TOKEN`, which `symm-run` sets), opens
//! GPU `LOCAL_RANK`, and shares allocations between processes as POSIX file
//! descriptors passed over unix sockets (for a job that spans nodes, as
//! fabric handles where the GPUs support them, or with
//! `SYMM_HANDLES=fabric`; else each node is an NVLink domain of its own).
//! From there everything works as with ranks that are threads of one
//! process.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;

use crate::backend::{CudaBackend, Sharing};
use crate::comm::{Comm, CommOptions};
use crate::error::{Error, Result};
use crate::store::{FileStore, Store, TcpStore, TcpStoreLimits};

/// Which launcher's variables described this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Launcher {
    /// `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE` (torchrun,
    /// `symm-run`, or set by hand).
    Torchrun,
    /// `OMPI_COMM_WORLD_RANK`, `_SIZE`, `_LOCAL_RANK`, `_LOCAL_SIZE`.
    OpenMpi,
    /// `SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`.
    Slurm,
}

/// Where the group's store lives.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreSpec {
    /// A [`TcpStore`] hosted by rank 0 at `MASTER_ADDR`.
    Tcp {
        /// Host name or address (`MASTER_ADDR`).
        host: String,
        /// Port: `SYMM_STORE_PORT`, else `MASTER_PORT` (plus one under
        /// torchrun, whose agent listens on `MASTER_PORT`).
        port: u16,
    },
    /// A [`FileStore`] in a directory every rank can reach
    /// (`SYMM_STORE_DIR`).
    Dir(PathBuf),
}

/// How processes share allocations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Handles {
    /// POSIX file descriptors over unix sockets: every rank on one node.
    FileDescriptor,
    /// Fabric handles through the store: ranks on several nodes of one
    /// NVLink domain (multi-node NVLink, which needs the driver's IMEX
    /// service). Checked when the rank opens its GPU; untested here, since
    /// no machine available to this project has such a fabric. The handles
    /// travel through the store in clear text: whoever can read the store
    /// and may use the domain's IMEX channels can map the memory.
    Fabric,
    /// A job on several nodes that did not choose: file descriptors
    /// within each node, whose ranks are then an NVLink domain of their
    /// own ([`Comm::domain`]); the job's collectives cross nodes through
    /// `symm::functional`. (Fabric handles only when asked for: GPUs
    /// report fabric support where IMEX is not provisioned, and their
    /// allocations then fail.)
    Auto,
}

/// Where this process sits in a job, as its launcher described it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LaunchEnv {
    /// The launcher whose variables were found.
    pub launcher: Launcher,
    /// This process's rank.
    pub rank: usize,
    /// Number of ranks.
    pub world_size: usize,
    /// Rank among the processes of this node: the GPU it opens (or GPU 0
    /// when the process sees only one, as with Slurm's `--gpus-per-task`).
    pub local_rank: usize,
    /// Processes on this node, when the launcher says.
    pub local_world_size: Option<usize>,
    /// The group's store.
    pub store: StoreSpec,
    /// Shared secret the TCP store checks (`SYMM_STORE_TOKEN`), if any:
    /// without one, anyone who reaches the store's port can forge the
    /// rendezvous records, and the store logs a warning. `symm-run` sets a
    /// random one per job.
    pub token: Option<String>,
    /// How allocations cross processes: `SYMM_HANDLES=fd|fabric`, else
    /// [`Handles::Auto`] when the launcher says the job spans nodes (fewer
    /// local processes than ranks), else file descriptors.
    pub handles: Handles,
}

/// Each launcher's variables: rank, world size, local rank, local size.
const LAUNCHERS: [(Launcher, [&str; 4]); 3] = [
    (
        Launcher::Torchrun,
        ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"],
    ),
    (
        Launcher::OpenMpi,
        [
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_SIZE",
        ],
    ),
    (
        Launcher::Slurm,
        [
            "SLURM_PROCID",
            "SLURM_NTASKS",
            "SLURM_LOCALID",
            "SLURM_NTASKS_PER_NODE",
        ],
    ),
];

impl LaunchEnv {
    /// Reads this process's environment.
    pub fn from_env() -> Result<LaunchEnv> {
        LaunchEnv::from_vars(|k| std::env::var(k).ok())
    }

    /// Reads the variables `get` returns (for tests and embedding). The
    /// first launcher with any of its rank or size variables set is the one;
    /// everything it needs must then be there, and the error lists what is
    /// missing or malformed ([`Error::Bootstrap`]).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<LaunchEnv> {
        LaunchEnv::read_vars(get).map_err(Error::Bootstrap)
    }

    /// [`from_vars`](Self::from_vars), with the problem in words.
    fn read_vars(get: impl Fn(&str) -> Option<String>) -> Result<LaunchEnv, String> {
        let get = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let Some((launcher, names)) = LAUNCHERS
            .iter()
            .find(|(_, n)| get(n[0]).is_some() || get(n[1]).is_some())
        else {
            return Err(format!(
                "no launcher environment found; set {} (torchrun, symm-run), or run under \
                 Open MPI ({}) or Slurm ({}), with MASTER_ADDR and MASTER_PORT (or SYMM_STORE_DIR)",
                LAUNCHERS[0].1[..3].join(", "),
                LAUNCHERS[1].1[..3].join(", "),
                LAUNCHERS[2].1[..3].join(", "),
            ));
        };
        let mut missing: Vec<&str> = Vec::new();
        let mut bad: Vec<String> = Vec::new();
        let mut num = |k: &'static str, required: bool| -> Option<usize> {
            match get(k) {
                None => {
                    if required {
                        missing.push(k);
                    }
                    None
                }
                Some(v) => match v.trim().parse::<usize>() {
                    Ok(n) => Some(n),
                    Err(_) => {
                        bad.push(format!("{k}={v:?} is not a non-negative integer"));
                        None
                    }
                },
            }
        };
        let rank = num(names[0], true);
        let world = num(names[1], true);
        let local = num(names[2], true);
        let local_world = num(names[3], false);
        let store = match get("SYMM_STORE_DIR") {
            Some(d) => Some(StoreSpec::Dir(PathBuf::from(d))),
            None => {
                let host = get("MASTER_ADDR");
                if host.is_none() {
                    missing.push("MASTER_ADDR");
                }
                // torchrun's agent already serves its own store on
                // MASTER_PORT (its workers see TORCHELASTIC_USE_AGENT_STORE),
                // so there symm's goes one port up unless SYMM_STORE_PORT
                // names one.
                let agent = *launcher == Launcher::Torchrun
                    && get("TORCHELASTIC_USE_AGENT_STORE")
                        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
                let (var, shift) = match get("SYMM_STORE_PORT") {
                    Some(_) => ("SYMM_STORE_PORT", 0),
                    None => ("MASTER_PORT", u16::from(agent)),
                };
                let port = match get(var) {
                    None => {
                        missing.push(var);
                        None
                    }
                    Some(p) => match p.trim().parse::<u16>() {
                        Ok(p) if p > 0 && p.checked_add(shift).is_some() => Some(p + shift),
                        _ => {
                            bad.push(format!("{var}={p:?} is not a port number (1-65535)"));
                            None
                        }
                    },
                };
                host.zip(port)
                    .map(|(host, port)| StoreSpec::Tcp { host, port })
            }
        };
        if !missing.is_empty() || !bad.is_empty() {
            let mut parts = Vec::new();
            if !missing.is_empty() {
                parts.push(format!("missing {}", missing.join(", ")));
            }
            parts.extend(bad);
            return Err(format!(
                "the {launcher:?} environment is incomplete: {}",
                parts.join("; ")
            ));
        }
        let (rank, world_size, local_rank) = (rank.unwrap(), world.unwrap(), local.unwrap());
        // Several nodes: fewer local processes than ranks, or Slurm's node
        // count (it sets SLURM_NTASKS_PER_NODE only when asked to).
        let nodes = ["SLURM_STEP_NUM_NODES", "SLURM_NNODES"]
            .iter()
            .find_map(|k| get(k)?.trim().parse::<usize>().ok());
        let multi_node = local_world.is_some_and(|lw| lw < world_size)
            || (*launcher == Launcher::Slurm && nodes.is_some_and(|n| n > 1));
        let handles = match get("SYMM_HANDLES").as_deref().map(str::trim) {
            Some("fd") => Handles::FileDescriptor,
            Some("fabric") => Handles::Fabric,
            Some(other) => return Err(format!("SYMM_HANDLES={other:?} is not fd or fabric")),
            None if multi_node => Handles::Auto,
            None => Handles::FileDescriptor,
        };
        if world_size == 0 || rank >= world_size {
            return Err(format!(
                "{}={rank} is not below {}={world_size}",
                names[0], names[1]
            ));
        }
        if let Some(lw) = local_world.filter(|&lw| local_rank >= lw) {
            return Err(format!(
                "{}={local_rank} is not below {}={lw}",
                names[2], names[3]
            ));
        }
        Ok(LaunchEnv {
            launcher: *launcher,
            rank,
            world_size,
            local_rank,
            local_world_size: local_world,
            store: store.expect("checked above"),
            token: get("SYMM_STORE_TOKEN"),
            handles,
        })
    }

    /// Opens the group's store: rank 0 hosts the TCP store and the others
    /// connect (retrying until `timeout`), or every rank opens the directory.
    pub fn open_store(&self, timeout: std::time::Duration) -> Result<Arc<dyn Store>> {
        let rank = self.rank;
        let store_err = |source| Error::Store {
            rank,
            group: crate::GroupName::NONE,
            source,
        };
        match &self.store {
            StoreSpec::Dir(d) => Ok(Arc::new(FileStore::new(d.clone()).map_err(store_err)?)),
            StoreSpec::Tcp { host, port } => {
                let addr = resolve(host, *port)?;
                let token = self.token.as_deref();
                let store = if rank == 0 {
                    // Room for every rank and a few connections more each,
                    // however large the job.
                    let mut limits = TcpStoreLimits::default();
                    limits.max_connections = limits
                        .max_connections
                        .max(self.world_size.saturating_mul(4));
                    // One line that says where ranks must reach the store,
                    // and a warning where ranks of other hosts cannot.
                    let other_hosts = self.local_world_size.is_some_and(|l| l < self.world_size);
                    if other_hosts && addr.ip().is_loopback() {
                        tracing::warn!(
                            "rank 0 hosts the group's store at {addr} (MASTER_ADDR={host}), a \
                             loopback address that ranks on other hosts cannot reach: set \
                             MASTER_ADDR to this host's address on the network they share"
                        );
                    } else {
                        tracing::info!(
                            "rank 0 hosts the group's store at {addr} (MASTER_ADDR={host}); \
                             every rank connects there"
                        );
                    }
                    TcpStore::host_with(addr, token, limits)
                } else {
                    TcpStore::connect(addr, token, timeout)
                };
                Ok(Arc::new(store.map_err(store_err)?))
            }
        }
    }
}

/// The first address `host:port` resolves to.
fn resolve(host: &str, port: u16) -> Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| Error::Bootstrap(format!("MASTER_ADDR={host:?} does not resolve: {e}")))?
        .next()
        .ok_or_else(|| Error::Bootstrap(format!("MASTER_ADDR={host:?} has no address")))
}

impl Comm {
    /// This process's rank of a one-process-per-GPU job, from its launcher's
    /// environment ([`LaunchEnv::from_env`]): GPU `LOCAL_RANK`, the store
    /// hosted by rank 0 at `MASTER_ADDR` (the port as the module docs say)
    /// or in `SYMM_STORE_DIR`.
    /// Collective: every rank calls it, and it waits for every rank to join
    /// (two processes on one GPU are refused there, on every rank).
    /// Rendezvous, its cache and every collective then behave as with
    /// [`run_local`](crate::run_local).
    pub fn from_env(options: CommOptions) -> Result<Comm> {
        Comm::from_launch_env(&LaunchEnv::from_env()?, options)
    }

    /// [`Comm::from_env`] with the environment already read.
    pub fn from_launch_env(env: &LaunchEnv, options: CommOptions) -> Result<Comm> {
        // Before the store: a bad world size must not bind a port first.
        crate::comm::check_world(env.rank, env.world_size)?;
        let store = env.open_store(options.timeout)?;
        // One visible GPU per process (CUDA_VISIBLE_DEVICES set per task):
        // it is the one, whatever the local rank.
        let ordinal = if crate::cuda::cuda_device_count() == 1 {
            0
        } else {
            env.local_rank
        };
        let sharing = match env.handles {
            Handles::FileDescriptor => Sharing::FileDescriptor,
            Handles::Fabric => Sharing::Fabric,
            Handles::Auto => {
                tracing::info!(
                    rank = env.rank,
                    "the job spans nodes: each node is an NVLink domain of its own (set \
                     SYMM_HANDLES=fabric on a multi-node NVLink system with IMEX)"
                );
                Sharing::FileDescriptor
            }
        };
        let backend = Arc::new(CudaBackend::new(env.rank, ordinal, sharing)?);
        Comm::with_backend(env.rank, env.world_size, store, options, backend)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> Result<LaunchEnv, String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        LaunchEnv::read_vars(|k| m.get(k).cloned())
    }

    const MASTER: [(&str, &str); 2] = [("MASTER_ADDR", "10.0.0.1"), ("MASTER_PORT", "29500")];

    #[test]
    fn each_launcher_is_read() {
        let t = env(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "1"),
            ("LOCAL_WORLD_SIZE", "2"),
            MASTER[0],
            MASTER[1],
        ])
        .unwrap();
        assert_eq!(
            (
                t.launcher,
                t.rank,
                t.world_size,
                t.local_rank,
                t.local_world_size
            ),
            (Launcher::Torchrun, 3, 8, 1, Some(2))
        );
        // Two processes per node of eight ranks: several nodes.
        assert_eq!(t.handles, Handles::Auto);
        assert_eq!(
            t.store,
            StoreSpec::Tcp {
                host: "10.0.0.1".into(),
                port: 29500
            }
        );
        let m = env(&[
            ("OMPI_COMM_WORLD_RANK", "5"),
            ("OMPI_COMM_WORLD_SIZE", "6"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "2"),
            MASTER[0],
            MASTER[1],
        ])
        .unwrap();
        assert_eq!(
            (m.launcher, m.rank, m.world_size, m.local_rank),
            (Launcher::OpenMpi, 5, 6, 2)
        );
        assert_eq!(m.handles, Handles::FileDescriptor);
        let s = env(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_NNODES", "2"),
            ("SYMM_STORE_DIR", "/shared/job"),
            ("SYMM_STORE_TOKEN", "s3cret"),
        ])
        .unwrap();
        assert_eq!(
            (s.launcher, s.world_size, s.local_world_size),
            (Launcher::Slurm, 4, None)
        );
        assert_eq!(s.store, StoreSpec::Dir("/shared/job".into()));
        assert_eq!(s.token.as_deref(), Some("s3cret"));
        let agent = env(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_RANK", "1"),
            ("TORCHELASTIC_USE_AGENT_STORE", "True"),
            MASTER[0],
            MASTER[1],
        ])
        .unwrap();
        assert!(matches!(agent.store, StoreSpec::Tcp { port: 29501, .. }));
        let own = env(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_RANK", "1"),
            ("TORCHELASTIC_USE_AGENT_STORE", "True"),
            ("SYMM_STORE_PORT", "4000"),
            MASTER[0],
            MASTER[1],
        ])
        .unwrap();
        assert!(matches!(own.store, StoreSpec::Tcp { port: 4000, .. }));
        let e = env(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "1"),
            ("LOCAL_RANK", "0"),
            ("SYMM_HANDLES", "ipc"),
            MASTER[0],
            MASTER[1],
        ])
        .unwrap_err();
        assert!(
            e.contains("SYMM_HANDLES=\"ipc\" is not fd or fabric"),
            "{e}"
        );
    }

    #[test]
    fn ranks_present_the_token_from_the_environment() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
            .to_string();
        let rank = |r: &str, token: Option<&str>| {
            let mut vars = vec![
                ("RANK", r),
                ("WORLD_SIZE", "2"),
                ("LOCAL_RANK", r),
                ("MASTER_ADDR", "127.0.0.1"),
                ("MASTER_PORT", port.as_str()),
            ];
            vars.extend(token.map(|t| ("SYMM_STORE_TOKEN", t)));
            env(&vars).unwrap()
        };
        let t = std::time::Duration::from_secs(10);
        let host = rank("0", Some("job-token")).open_store(t).unwrap();
        let peer = rank("1", Some("job-token")).open_store(t).unwrap();
        peer.set("k", b"v").unwrap();
        assert_eq!(host.get("k", t).unwrap(), b"v");
        for (token, says) in [
            (None, "requires a token"),
            (Some("other-job"), "refused the token"),
        ] {
            let Err(e) = rank("1", token).open_store(t) else {
                panic!("rank 1 joined with token {token:?}");
            };
            let e = e.to_string();
            assert!(e.contains("rank 1") && e.contains(says), "{e}");
        }
        drop(peer);
    }

    #[test]
    fn missing_and_malformed_variables_are_listed() {
        let e = env(&[]).unwrap_err();
        assert!(
            e.contains("RANK, WORLD_SIZE, LOCAL_RANK") && e.contains("SLURM_PROCID"),
            "{e}"
        );
        let e = env(&[("RANK", "0"), ("WORLD_SIZE", "2")]).unwrap_err();
        assert!(
            e.contains("missing LOCAL_RANK, MASTER_ADDR, MASTER_PORT"),
            "{e}"
        );
        let e = env(&[
            ("RANK", "x"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_RANK", "0"),
            ("MASTER_ADDR", "h"),
            ("MASTER_PORT", "99999"),
        ])
        .unwrap_err();
        assert!(
            e.contains("RANK=\"x\"") && e.contains("MASTER_PORT=\"99999\""),
            "{e}"
        );
        let e = env(&[
            ("RANK", "2"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_RANK", "0"),
            MASTER[0],
            MASTER[1],
        ])
        .unwrap_err();
        assert!(e.contains("RANK=2 is not below WORLD_SIZE=2"), "{e}");
        let e = env(&[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "3"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            MASTER[0],
            MASTER[1],
        ])
        .unwrap_err();
        assert!(
            e.contains("OMPI_COMM_WORLD_LOCAL_RANK=3 is not below"),
            "{e}"
        );
    }
}

//! A group's NVLink domains: the sets of ranks that can map each other's
//! memory. Symmetric memory, rendezvous and kernels work inside one; a
//! group that spans several reaches across them through NCCL
//! (`symm::functional`), on its domain and rail subgroups
//! ([`Comm::domain`](crate::Comm::domain), [`Comm::rails`](crate::Comm::rails)).
//!
//! A rank's domain is fixed where its top-level group is made: its
//! device's host (ranks of one host map each other's memory), or the one
//! multi-node NVLink system of fabric handles, split further by simulated
//! nodes ([`CommOptions::nodes`](crate::CommOptions::nodes)). A subgroup's
//! ranks keep theirs.

use std::fmt;

/// Where each rank of a group sits: its NVLink domain, numbered in the
/// order of the domains' first ranks, the same on every rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Each rank's identity of its domain: the machine's word for it and
    /// the simulated node (what a subgroup inherits).
    keys: Vec<(u64, u32)>,
    /// Each rank's domain index.
    domain_of: Vec<usize>,
    /// Number of domains (asked on every launch).
    domains: usize,
    /// See [`domain_size`](Self::domain_size) (asked on every functional
    /// call).
    domain_size: Option<usize>,
    /// See [`in_blocks`](Self::in_blocks).
    in_blocks: bool,
}

/// The environment variable that splits a group's ranks into simulated
/// nodes ([`CommOptions::nodes`](crate::CommOptions::nodes)).
pub const NODES_VAR: &str = "SYMM_NODES";

impl Topology {
    /// The topology of ranks whose domains are `keys`, in rank order.
    pub(crate) fn from_keys(keys: Vec<(u64, u32)>) -> Topology {
        let mut firsts: Vec<(u64, u32)> = Vec::new();
        let domain_of: Vec<usize> = keys
            .iter()
            .map(|k| match firsts.iter().position(|f| f == k) {
                Some(d) => d,
                None => {
                    firsts.push(*k);
                    firsts.len() - 1
                }
            })
            .collect();
        let domains = firsts.len();
        let mut sizes = vec![0usize; domains];
        for &d in &domain_of {
            sizes[d] += 1;
        }
        let domain_size = sizes.windows(2).all(|w| w[0] == w[1]).then(|| sizes[0]);
        // Consecutive ranks per domain, in domain order: rank r in domain
        // r / size.
        let in_blocks = domain_size.is_some_and(|l| {
            domain_of
                .iter()
                .enumerate()
                .all(|(r, &d)| d == r / l.max(1))
        });
        Topology {
            keys,
            domain_of,
            domains,
            domain_size,
            in_blocks,
        }
    }

    /// A top-level group's topology: each rank's machine domain
    /// (`machine`, in rank order), split into `nodes` simulated nodes of
    /// consecutive ranks (as torchrun numbers nodes).
    pub(crate) fn top_level(machine: &[u64], nodes: usize) -> Topology {
        let world = machine.len();
        Topology::from_keys(
            machine
                .iter()
                .enumerate()
                .map(|(r, &m)| (m, (r * nodes.max(1) / world.max(1)) as u32))
                .collect(),
        )
    }

    /// The topology of the subgroup of `members` (this group's ranks, in
    /// the subgroup's rank order): each keeps its domain.
    pub(crate) fn sub(&self, members: &[usize]) -> Topology {
        Topology::from_keys(members.iter().map(|&r| self.keys[r]).collect())
    }

    /// Number of domains.
    pub fn domains(&self) -> usize {
        self.domains
    }

    /// Whether the group spans more than one domain.
    pub fn spans_domains(&self) -> bool {
        self.domains() > 1
    }

    /// `rank`'s domain.
    pub fn domain_of(&self, rank: usize) -> usize {
        self.domain_of[rank]
    }

    /// The ranks of `domain`, in rank order.
    pub fn ranks_of(&self, domain: usize) -> Vec<usize> {
        (0..self.domain_of.len())
            .filter(|&r| self.domain_of[r] == domain)
            .collect()
    }

    /// The ranks of each domain, where every domain has as many (`None`
    /// where they differ).
    pub fn domain_size(&self) -> Option<usize> {
        self.domain_size
    }

    /// Whether every domain is a block of consecutive ranks, in domain
    /// order (as torchrun numbers nodes), and all are of one size: then
    /// the domains' chunks of a message in rank order are consecutive.
    pub fn in_blocks(&self) -> bool {
        self.in_blocks
    }

    /// `rank`'s index among its domain's ranks: its rank in
    /// [`Comm::domain`](crate::Comm::domain), and its rail.
    pub fn local_rank(&self, rank: usize) -> usize {
        let d = self.domain_of[rank];
        self.domain_of[..rank].iter().filter(|&&x| x == d).count()
    }
}

/// `2 domains: ranks [0, 1] and [2, 3]`.
impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.domains();
        let sets: Vec<String> = (0..n).map(|d| format!("{:?}", self.ranks_of(d))).collect();
        match n {
            1 => write!(f, "1 domain: ranks {}", sets[0]),
            _ => write!(f, "{n} domains: ranks {}", sets.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulated_nodes_split_consecutive_ranks() {
        let t = Topology::top_level(&[5; 8], 2);
        assert_eq!(t.domains(), 2);
        assert_eq!(t.ranks_of(0), vec![0, 1, 2, 3]);
        assert_eq!(t.ranks_of(1), vec![4, 5, 6, 7]);
        assert_eq!((t.domain_of(5), t.local_rank(5)), (1, 1));
        assert_eq!(t.to_string(), "2 domains: ranks [0, 1, 2, 3], [4, 5, 6, 7]");
        // Uneven: 3 nodes of 4 ranks.
        let t = Topology::top_level(&[5; 4], 3);
        assert_eq!(t.domains(), 3);
        assert_eq!(t.ranks_of(0), vec![0, 1]);
        assert!(!Topology::top_level(&[5; 4], 1).spans_domains());
        assert_eq!((t.domain_size(), t.in_blocks()), (None, false));
        let t = Topology::top_level(&[5; 8], 4);
        assert_eq!((t.domain_size(), t.in_blocks()), (Some(2), true));
    }

    #[test]
    fn machine_domains_and_subgroups_keep_them() {
        // Hosts A, B, A, B: two domains of ranks 0, 2 and 1, 3.
        let t = Topology::top_level(&[1, 2, 1, 2], 1);
        assert_eq!((t.ranks_of(0), t.ranks_of(1)), (vec![0, 2], vec![1, 3]));
        assert_eq!(t.local_rank(3), 1);
        // Of one size, but not blocks.
        assert_eq!((t.domain_size(), t.in_blocks()), (Some(2), false));
        // The subgroup of parent ranks 3, 2, 1 (in that order).
        let s = t.sub(&[3, 2, 1]);
        assert_eq!((s.ranks_of(0), s.ranks_of(1)), (vec![0, 2], vec![1]));
        // A subgroup inside one domain spans none.
        assert!(!t.sub(&[0, 2]).spans_domains());
    }
}

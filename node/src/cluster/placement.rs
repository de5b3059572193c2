//! Placement: which of the orphaned sessions this node takes in one sweep. Every node computes the same
//! plan from the same inputs (the registry's loads and the orphans sorted by id): the orphans are dealt
//! one by one to the least-loaded live node (ties by node id; draining nodes and `ROLE=worker` nodes, which
//! host no sessions, excluded), which fills the survivors up evenly, and each node takes the contiguous
//! slice of the sorted orphans dealt to it, so nodes do not race for the same sessions. At most `max` per
//! sweep; a slice left over, or a claim lost to a racing node whose view differed, is dealt again at the
//! next sweep.

use std::ops::Range;

use super::registry::NodeInfo;

/// The slice of the id-sorted orphan list `me` takes this sweep (at most `max` long). `my_sessions` stands
/// in for `me`'s load only when the registry does not list it yet.
pub(crate) fn share(
    me: &str,
    my_sessions: usize,
    nodes: &[NodeInfo],
    orphans: usize,
    max: usize,
) -> Range<usize> {
    let mut loads: Vec<(usize, &str)> = nodes
        .iter()
        .filter(|n| n.takes_sessions())
        .map(|n| (n.sessions, n.node_id.as_str()))
        .collect();
    if !nodes.iter().any(|n| n.node_id == me) {
        loads.push((my_sessions, me));
    }
    loads.sort_by(|a, b| a.1.cmp(b.1));
    let mut dealt = vec![0usize; loads.len()];
    for _ in 0..orphans {
        let Some(least) = (0..loads.len()).min_by_key(|&i| (loads[i].0 + dealt[i], loads[i].1))
        else {
            return 0..0;
        };
        dealt[least] += 1;
    }
    let Some(mine) = loads.iter().position(|(_, id)| *id == me) else {
        return 0..0;
    };
    let start: usize = dealt[..mine].iter().sum();
    start..start + dealt[mine].min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, sessions: usize) -> NodeInfo {
        NodeInfo {
            node_id: id.into(),
            url: String::new(),
            sessions,
            is_draining: false,
            hosts_sessions: true,
            heartbeat_at: 0,
        }
    }

    #[test]
    fn alone_takes_up_to_the_cap() {
        assert_eq!(share("a", 0, &[], 9, 5), 0..5);
        assert_eq!(share("a", 3, &[node("a", 9)], 3, 5), 0..3);
    }

    #[test]
    fn equal_survivors_split_the_orphans_in_disjoint_slices() {
        let nodes = [node("b", 50), node("c", 50)];
        assert_eq!(share("b", 50, &nodes, 50, 64), 0..25);
        assert_eq!(share("c", 50, &nodes, 50, 64), 25..50);
    }

    #[test]
    fn the_less_loaded_node_fills_up_first() {
        let nodes = [node("a", 2), node("b", 1), node("c", 4)];
        // Dealt: b (1->2), a (2->3) , b (2->3): a takes 1, b takes 2, c none.
        assert_eq!(share("a", 2, &nodes, 3, 5), 0..1);
        assert_eq!(share("b", 1, &nodes, 3, 5), 1..3);
        assert_eq!(share("c", 4, &nodes, 3, 5), 3..3);
    }

    #[test]
    fn the_cap_shortens_a_slice_without_moving_the_others() {
        let nodes = [node("a", 0), node("b", 0)];
        assert_eq!(share("a", 0, &nodes, 10, 2), 0..2);
        assert_eq!(share("b", 0, &nodes, 10, 2), 5..7);
    }

    #[test]
    fn draining_nodes_take_nothing() {
        let mut drained = node("a", 0);
        drained.is_draining = true;
        assert_eq!(share("b", 4, &[drained.clone(), node("b", 4)], 3, 5), 0..3);
        assert_eq!(share("a", 0, &[drained], 3, 5), 0..0);
    }

    #[test]
    fn worker_nodes_take_nothing_even_when_least_loaded() {
        let mut worker = node("a", 0);
        worker.hosts_sessions = false;
        let nodes = [worker, node("b", 7)];
        assert_eq!(share("b", 7, &nodes, 3, 5), 0..3);
        assert_eq!(share("a", 0, &nodes, 3, 5), 0..0);
    }
}

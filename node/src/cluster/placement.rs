//! Placement: how many orphaned sessions this node may take in one sweep. Only the least-loaded live node
//! (fewest sessions, ties broken by node id; draining nodes excluded) takes any, and only enough to reach
//! the next node's load, so a crashed node's sessions spread over the survivors sweep after sweep.

use super::registry::NodeInfo;

/// The number of sessions `me` (with `my_sessions` loaded now) may take this sweep, at most `max`.
pub(crate) fn budget(me: &str, my_sessions: usize, nodes: &[NodeInfo], max: usize) -> usize {
    let mut loads: Vec<(usize, &str)> = nodes
        .iter()
        .filter(|n| !n.is_draining && n.node_id != me)
        .map(|n| (n.sessions, n.node_id.as_str()))
        .collect();
    loads.push((my_sessions, me));
    loads.sort();
    match loads.as_slice() {
        [(_, first), ..] if *first != me => 0,
        [_] => max,
        [_, (next, _), ..] => (next.saturating_sub(my_sessions)).clamp(1, max.max(1)),
        [] => 0,
    }
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
            heartbeat_at: 0,
        }
    }

    #[test]
    fn alone_takes_up_to_the_cap() {
        assert_eq!(budget("a", 0, &[], 5), 5);
        assert_eq!(budget("a", 3, &[node("a", 9)], 5), 5);
    }

    #[test]
    fn only_the_least_loaded_takes() {
        let nodes = [node("a", 2), node("b", 1), node("c", 4)];
        assert_eq!(budget("a", 2, &nodes, 5), 0);
        assert_eq!(budget("b", 1, &nodes, 5), 1);
        assert_eq!(budget("c", 4, &nodes, 5), 0);
    }

    #[test]
    fn ties_go_to_the_smallest_node_id() {
        let nodes = [node("a", 0), node("b", 0)];
        assert_eq!(budget("a", 0, &nodes, 5), 1);
        assert_eq!(budget("b", 0, &nodes, 5), 0);
    }

    #[test]
    fn takes_enough_to_reach_the_next_node_within_the_cap() {
        let nodes = [node("a", 0), node("b", 3), node("c", 10)];
        assert_eq!(budget("a", 0, &nodes, 5), 3);
        assert_eq!(budget("a", 0, &[node("b", 30)], 5), 5);
    }

    #[test]
    fn draining_nodes_are_not_counted() {
        let mut drained = node("a", 0);
        drained.is_draining = true;
        assert_eq!(budget("b", 4, &[drained], 5), 5);
    }
}

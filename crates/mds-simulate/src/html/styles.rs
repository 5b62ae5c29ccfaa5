//! How each policy is drawn, the same on every page: ours in our blue, told apart by dash;
//! each peer in a colour and dash of its own, so that sixteen peers stay distinguishable in
//! colour, in grey print and to a colour-blind reader.

/// Our colour: every line and dot of ours.
pub const OURS: &str = "#0072b2";

/// A solid line.
pub const SOLID: &str = "";
/// The plain dashed line.
pub const DASHED: &str = "5 3";

/// Our policies' dashes, in order (the scaler under test first).
const OUR_DASHES: [&str; 5] = [SOLID, "8 3", "2 2", "8 3 2 3", "12 3 2 3 2 3"];

/// Peers' colours: none of them blue; sixteen apart (Okabe-Ito's and Tol's muted and vibrant
/// sets), so every built-in peer and a few teams' files each have their own.
const PEER_COLOURS: [&str; 16] = [
    "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#882255", "#117733", "#999933", "#44aa99",
    "#aa4499", "#661100", "#000000", "#888888", "#ee3377", "#997700", "#bb5566", "#555555",
];

/// Peers' dashes; five against sixteen colours, so no two of eighty peers share both.
const PEER_DASHES: [&str; 5] = [DASHED, "1 3", "9 3 2 3", "3 3", "12 4"];

/// How one policy is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    pub colour: &'static str,
    /// An SVG `stroke-dasharray` (empty: solid).
    pub dash: &'static str,
}

/// The style of each policy, given in order with whether it is ours: ours take our colour and
/// the next of our dashes, peers the next colour and dash of theirs.
pub fn styles(policies: &[bool]) -> Vec<Style> {
    let (mut ours, mut peers) = (0, 0);
    policies
        .iter()
        .map(|&is_ours| {
            if is_ours {
                ours += 1;
                Style {
                    colour: OURS,
                    dash: OUR_DASHES[(ours - 1) % OUR_DASHES.len()],
                }
            } else {
                peers += 1;
                let i = peers - 1;
                Style {
                    colour: PEER_COLOURS[i % PEER_COLOURS.len()],
                    dash: PEER_DASHES[i % PEER_DASHES.len()],
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_peers_and_four_of_ours_are_each_drawn_their_own_way() {
        let mut policies = vec![true; 4];
        policies.extend([false; 16]);
        let drawn = styles(&policies);
        for (i, a) in drawn.iter().enumerate() {
            for b in &drawn[i + 1..] {
                assert_ne!(a, b, "two policies drawn alike");
            }
        }
        assert!(drawn[..4].iter().all(|s| s.colour == OURS));
        // Sixteen peers, sixteen colours, none of them ours.
        let colours: std::collections::BTreeSet<&str> =
            drawn[4..].iter().map(|s| s.colour).collect();
        assert_eq!(colours.len(), 16);
        assert!(!colours.contains(OURS));
    }
}

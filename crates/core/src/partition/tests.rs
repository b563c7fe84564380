//! Unit tests of partitioned sources: how targets and keys are homed, which
//! targets a resize gates, how layouts are written, and map validation at and
//! past its limits.

use super::*;

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn map(partitions: u32, epoch: u64, from: &[u32]) -> PartitionMap {
    let from = from.iter().map(|c| Layout::Count(*c)).collect();
    PartitionMap { partitions: Layout::Count(partitions), epoch, from }
}

fn ix(i: u32) -> Part {
    Part::Index(i)
}

#[test]
fn home_is_stable_and_spreads_targets() {
    // Pinned: changing the hash would move every target of every deployed source.
    assert_eq!(home(&n("customer-1"), 4), home(&n("customer-1"), 4));
    let pinned: Vec<u32> = ["a", "b", "customer-1", "customer-2"].iter().map(|t| home(&n(t), 8)).collect();
    assert_eq!(pinned, vec![4, 5, 7, 2], "FNV-1a 64, checked against an independent implementation");
    let mut counts = [0u32; 4];
    for i in 0..4_000 {
        counts[home(&n(&format!("t{i}")), 4) as usize] += 1;
    }
    assert!(counts.iter().all(|&c| (900..1_100).contains(&c)), "{counts:?}");
    assert_eq!(home(&n("x"), 1), 0);
}

#[test]
fn a_key_has_one_home_whatever_the_map() {
    // Pinned: changing it would lose every key recorded before the change.
    assert_eq!(KEY_HOMES, 64);
    assert_eq!(key_home("order-17"), bucket(fnv(b"order-17"), 64));
    let homes: std::collections::BTreeSet<u32> = (0..2_000).map(|i| key_home(&format!("k{i}"))).collect();
    assert_eq!(homes.len(), 64, "keys spread over every home");
}

#[test]
fn a_target_is_gated_only_when_its_home_moves() {
    let m = map(4, 2, &[2]);
    for i in 0..200 {
        let t = n(&format!("t{i}"));
        let (old, new) = (home(&t, 2), home(&t, 4));
        let gates = if old == new { vec![] } else { vec![ix(old)] };
        assert_eq!(m.route(&t), Route { gates, home: ix(new) });
    }
    assert_eq!(map(4, 2, &[]).route(&n("t1")).gates, Vec::<Part>::new());
    assert_eq!(m.parts(), (0..4).map(ix).collect::<Vec<_>>());
    assert_eq!(map(2, 3, &[4]).parts().len(), 4);
}

#[test]
fn the_plain_object_is_a_layout_of_its_own() {
    let into = PartitionMap { partitions: Layout::Count(2), epoch: 2, from: vec![Layout::Plain] };
    let back = PartitionMap { partitions: Layout::Plain, epoch: 3, from: vec![Layout::Count(2)] };
    for i in 0..50 {
        let t = n(&format!("t{i}"));
        let h = ix(home(&t, 2));
        assert_eq!(into.route(&t), Route { gates: vec![Part::Plain], home: h });
        assert_eq!(back.route(&t), Route { gates: vec![h], home: Part::Plain });
        assert!(into.reaches(&t, Part::Plain) && into.reaches(&t, h));
        assert!(!map(2, 3, &[]).reaches(&t, Part::Plain));
    }
    assert_eq!(into.parts(), vec![Part::Plain, ix(0), ix(1)]);
    assert!(into.has_plain() && back.has_plain() && !map(2, 1, &[]).has_plain());
    assert_eq!(part_of(&n("orders")), Part::Plain);
    assert_eq!(part_of(&n("orders:3")), ix(3));
    assert_eq!(Part::Plain.object(&n("orders")), n("orders"));
    assert_eq!(ix(3).object(&n("orders")), n("orders:3"));
}

#[test]
fn a_second_resize_gates_through_every_unsettled_layout_oldest_first() {
    let m = map(3, 3, &[2, 4]);
    let mut seen_two_gates = false;
    for i in 0..300 {
        let t = n(&format!("x-{i}"));
        let r = m.route(&t);
        let (h2, h4, h3) = (ix(home(&t, 2)), ix(home(&t, 4)), ix(home(&t, 3)));
        assert_eq!(r.home, h3);
        assert_eq!(
            r.gates.first().copied(),
            if h2 == h3 && (h4 == h3 || h4 == h2) { None } else { Some(h2) }
        );
        assert!(r.gates.iter().all(|g| *g == h2 || *g == h4), "{r:?}");
        assert_ne!(r.gates.last(), Some(&h3), "the home is never its own last gate");
        assert_eq!(r.chain().last(), Some(&h3));
        seen_two_gates |= r.gates.len() == 2;
        for h in [h2, h4, h3] {
            assert!(m.reaches(&t, h), "every layout's home is reachable");
        }
    }
    assert!(seen_two_gates, "some target moves twice");
    // A map that forgot the first layout cannot reach some of its homes.
    let skipping = map(3, 3, &[4]);
    let stranded = (0..300).map(|i| n(&format!("x-{i}"))).find(|t| !skipping.reaches(t, ix(home(t, 2))));
    assert!(stranded.is_some());
}

#[test]
fn layouts_are_counts_or_plain_written_one_or_many() {
    let one: PartitionMap = serde_json::from_str(r#"{"partitions":4,"epoch":2,"from":2}"#).unwrap();
    assert_eq!(one, map(4, 2, &[2]));
    let many: PartitionMap = serde_json::from_str(r#"{"partitions":3,"epoch":3,"from":[2,4]}"#).unwrap();
    assert_eq!(many, map(3, 3, &[2, 4]));
    let none: PartitionMap = serde_json::from_str(r#"{"partitions":3,"epoch":3}"#).unwrap();
    assert!(!none.is_settling());
    assert_eq!(serde_json::to_string(&none).unwrap(), r#"{"partitions":3,"epoch":3}"#);
    let plain: PartitionMap = serde_json::from_str(r#"{"partitions":2,"epoch":3,"from":"plain"}"#).unwrap();
    assert_eq!(plain.from, vec![Layout::Plain]);
    let text = serde_json::to_string(&plain).unwrap();
    assert_eq!(text, r#"{"partitions":2,"epoch":3,"from":["plain"]}"#);
    assert_eq!(serde_json::from_str::<PartitionMap>(&text).unwrap(), plain);
    let back: PartitionMap = serde_json::from_str(r#"{"partitions":"plain","epoch":4,"from":[2]}"#).unwrap();
    assert_eq!(back.partitions, Layout::Plain);
    for bad in [
        r#"{"partitions":3,"epoch":3,"from":"2"}"#,
        r#"{"partitions":"Plain","epoch":3}"#,
        r#"{"partitions":-1,"epoch":3}"#,
        r#"{"partitions":3,"epoch":3,"extra":1}"#,
    ] {
        assert!(serde_json::from_str::<PartitionMap>(bad).is_err(), "{bad}");
    }
    assert_eq!(serde_json::to_string(&[Part::Plain, ix(2)]).unwrap(), r#"["plain",2]"#);
    assert_eq!(serde_json::from_str::<Vec<Part>>(r#"["plain",2]"#).unwrap(), vec![Part::Plain, ix(2)]);
}

#[test]
fn maps_are_validated_at_and_past_their_limits() {
    let s = n("orders");
    let ok = map(MAX_PARTITIONS, 1, &[1]);
    assert!(ok.validate(&s).is_ok());
    assert!(map(MAX_PARTITIONS + 1, 1, &[1]).validate(&s).is_err());
    assert!(map(0, 1, &[1]).validate(&s).is_err());
    assert!(map(4, 1, &[0]).validate(&s).is_err());
    assert!(map(4, 0, &[]).validate(&s).is_err());
    assert!(map(4, SEQ_MAX + 1, &[]).validate(&s).is_err());
    assert!(map(4, 1, &[4]).validate(&s).is_err(), "a resize changes the count");
    assert!(map(4, 1, &[2, 2]).validate(&s).is_err());
    assert!(map(4, 1, &[2, 3, 2]).validate(&s).is_ok(), "a count may come back");
    let plain_twice = PartitionMap { partitions: Layout::Plain, epoch: 1, from: vec![Layout::Plain] };
    assert!(plain_twice.validate(&s).is_err());
    let at: Vec<u32> = (1..=MAX_UNSETTLED_LAYOUTS).map(|i| i + 4).collect();
    assert!(map(4, 1, &at).validate(&s).is_ok());
    let past: Vec<u32> = (1..=MAX_UNSETTLED_LAYOUTS + 1).map(|i| i + 4).collect();
    assert!(map(4, 1, &past).validate(&s).is_err());
    let long = n(&"s".repeat(MAX_PARTITIONED_NAME_BYTES as usize));
    assert!(ok.validate(&long).is_ok());
    assert_eq!(partition_name(&long, 63).as_str().len(), MAX_NAME_BYTES as usize);
    assert!(ok.validate(&n(&"s".repeat(MAX_PARTITIONED_NAME_BYTES as usize + 1))).is_err());
    assert_eq!(partition_name(&s, 3).as_str(), "orders:3");
    assert_ne!(map(4, 1, &[2]).id(), map(4, 1, &[]).id());
    assert_ne!(map(4, 1, &[]).id(), map(4, 2, &[]).id());
}

#[test]
fn a_partitions_name_spells_its_logical_source_and_index() {
    assert_eq!(partition_of(&n("orders:3")), Some((n("orders"), 3)));
    assert_eq!(partition_of(&n("a:b:63")), Some((n("a:b"), 63)));
    assert_eq!(partition_of(&n("orders:64")), None);
    assert_eq!(partition_of(&n("orders")), None);
    assert_eq!(partition_of(&n("orders:x")), None);
    assert_eq!(partition_of(&n(":1")), None);
}

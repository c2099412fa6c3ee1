//! The Geo-SDUR paper's social network (Sciascia, Pedone, DSN 2013,
//! §VI-A): users partitioned, each with three lists kept in its own
//! partition — its posts, its *producers* (whom it follows) and its
//! *consumers* (who follow it) — and three operations on them: timeline,
//! post and follow.
//!
//! A list is one value: ids separated by commas, then `;` and a tag that
//! makes the value unique (the history tells writes apart by value), at
//! most [`SocialMix::list_len`] ids (the newest). A list never written
//! holds what the user starts with: no posts, no consumers, and
//! [`SocialMix::default_producers`] producers drawn from its id — half in
//! its own partition, half in the others, as the follows of a grown
//! network would be (half of them global) — so that timelines read across
//! partitions from the start without a preload. (Consumers start empty:
//! nothing reads them but a follow, which rewrites them.)
//!
//! Keys are named so that the store's hash puts a user's three lists in the
//! user's partition: `{prefix}u{P}.{I}{L}{J}` for user `I` of partition `P`
//! and list `L` (`s` posts, `p` producers, `c` consumers), with `J` the
//! first number that makes [`Topology::partition_of`] answer `P` (about as
//! many tries as there are partitions). A hash cannot be asked for a
//! partition, so the names are found by search.

use causeway_protocol::{Key, PartitionId, Topology, Value};
use std::sync::Arc;

/// The operations' shares and the lists' sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocialMix {
    /// Share of timelines, in parts per million (the paper: 85 %).
    pub timeline_ppm: u32,
    /// Share of posts, in parts per million (7.5 %); the rest follow.
    pub post_ppm: u32,
    /// Share of follows whose two users are in different partitions (50 %).
    pub follow_global_ppm: u32,
    /// A list keeps its newest this many ids.
    pub list_len: u32,
    /// Producers a user starts with.
    pub default_producers: u32,
}

impl Default for SocialMix {
    /// The paper's mix: 85 % timeline, 7.5 % post, 7.5 % follow of which
    /// half global; lists of at most 8 ids, users starting with 4 producers.
    fn default() -> Self {
        SocialMix {
            timeline_ppm: 850_000,
            post_ppm: 75_000,
            follow_global_ppm: 500_000,
            list_len: 8,
            default_producers: 4,
        }
    }
}

impl SocialMix {
    /// Says what is wrong with the mix, if anything.
    pub fn validate(&self) -> Result<(), String> {
        if u64::from(self.timeline_ppm) + u64::from(self.post_ppm) > 1_000_000 || self.follow_global_ppm > 1_000_000 {
            return Err("the social network's shares must be fractions whose sum is at most 1".into());
        }
        if !(1..=64).contains(&self.list_len) || self.default_producers > self.list_len {
            return Err("a list keeps 1 to 64 ids, and a user starts with at most that many producers".into());
        }
        Ok(())
    }
}

/// A user: its partition and its number there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct User {
    pub partition: u32,
    pub index: u32,
}

impl User {
    /// `P.I`, as lists hold it.
    pub fn id(self) -> String {
        format!("{}.{}", self.partition, self.index)
    }

    /// The user a list id names.
    pub fn parse(id: &str) -> Option<User> {
        let (p, i) = id.split_once('.')?;
        Some(User { partition: p.parse().ok()?, index: i.parse().ok()? })
    }
}

/// A user's lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum List {
    Posts,
    Producers,
    Consumers,
}

impl List {
    fn letter(self) -> char {
        match self {
            List::Posts => 's',
            List::Producers => 'p',
            List::Consumers => 'c',
        }
    }
}

/// One operation of the social network, with the users it names. Its
/// reads are the plan's first round; what follows depends on what they
/// return ([`SocialKeys::second_round`], [`SocialKeys::writes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocialStep {
    /// Read `user`'s producers, then the posts of every user they name: a
    /// read-only transaction, global when a producer lives in another
    /// partition.
    Timeline { user: User },
    /// Read `user`'s posts and write them back with a new post (the
    /// transaction's id) appended: local.
    Post { user: User },
    /// `user` follows `followed`: read `user`'s producers and `followed`'s
    /// consumers, and write each with the other appended; global when the
    /// two live in different partitions.
    Follow { user: User, followed: User },
}

/// Key names and lists of one social network: shared by every plan of a
/// generator (cheap to clone).
#[derive(Clone, Debug)]
pub struct SocialKeys {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    topology: Topology,
    prefix: String,
    users_per_partition: u32,
    mix: SocialMix,
}

impl PartialEq for SocialKeys {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
            || (self.inner.prefix == other.inner.prefix
                && self.inner.users_per_partition == other.inner.users_per_partition
                && self.inner.mix == other.inner.mix
                && self.inner.topology.partition_count() == other.inner.topology.partition_count())
    }
}

impl Eq for SocialKeys {}

/// SplitMix64's finalizer: a user's default producers from its id.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SocialKeys {
    pub fn new(topology: &Topology, prefix: &str, users_per_partition: u32, mix: SocialMix) -> Self {
        SocialKeys {
            inner: Arc::new(Inner {
                topology: topology.clone(),
                prefix: prefix.to_string(),
                users_per_partition: users_per_partition.max(1),
                mix,
            }),
        }
    }

    pub fn mix(&self) -> &SocialMix {
        &self.inner.mix
    }

    pub fn users_per_partition(&self) -> u32 {
        self.inner.users_per_partition
    }

    /// The key of `user`'s `list`, in `user`'s partition.
    pub fn key(&self, user: User, list: List) -> Key {
        let t = &self.inner.topology;
        let want = PartitionId(user.partition);
        let base = format!("{}u{}.{}{}", self.inner.prefix, user.partition, user.index, list.letter());
        // Each try lands in the partition with odds 1 in N: a million
        // misses in a row do not happen.
        for j in 0..1_000_000u32 {
            let name = format!("{base}{j}");
            if t.partition_of(name.as_bytes()) == want {
                return Key::from(name);
            }
        }
        panic!("no name of {base}N hashes to partition {}", user.partition)
    }

    /// The producers `user` starts with: half of them (the even places)
    /// in its own partition, the others in the other partitions.
    pub fn default_producers(&self, user: User) -> Vec<User> {
        let n = self.inner.topology.partition_count();
        let users = self.inner.users_per_partition;
        let mut out: Vec<User> = Vec::new();
        for j in 0..self.inner.mix.default_producers {
            let h = mix64(
                (u64::from(user.partition) << 40) ^ (u64::from(user.index) << 8) ^ u64::from(j) ^ 0x5d0c_1a1e_0000_0000,
            );
            let partition =
                if j % 2 == 0 || n < 2 { user.partition } else { (user.partition + 1 + (h as u32) % (n - 1)) % n };
            let mut index = ((h >> 32) % u64::from(users)) as u32;
            if partition == user.partition && index == user.index && users > 1 {
                index = (index + 1) % users;
            }
            let producer = User { partition, index };
            if producer != user && !out.contains(&producer) {
                out.push(producer);
            }
        }
        out
    }

    /// The ids a list value holds; `None` (never written): what `default`
    /// starts with.
    pub fn parse(value: Option<&[u8]>, default: impl FnOnce() -> Vec<String>) -> Vec<String> {
        let Some(v) = value else { return default() };
        let text = String::from_utf8_lossy(v);
        let ids = text.split_once(';').map_or(&*text, |(ids, _)| ids);
        ids.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect()
    }

    /// A list value: `ids` (the newest [`SocialMix::list_len`]), unique by `tag`.
    pub fn value(&self, ids: &[String], tag: &str) -> String {
        let keep = ids.len().saturating_sub(self.inner.mix.list_len as usize);
        format!("{};{tag}", ids[keep..].join(","))
    }

    /// What `user`'s `list` holds, given the value read (`None`: never written).
    pub fn list(&self, user: User, list: List, value: Option<&[u8]>) -> Vec<String> {
        SocialKeys::parse(value, || match list {
            List::Producers => self.default_producers(user).into_iter().map(User::id).collect(),
            List::Posts | List::Consumers => Vec::new(),
        })
    }

    /// The keys `step` reads first.
    pub fn first_round(&self, step: &SocialStep) -> Vec<Key> {
        match *step {
            SocialStep::Timeline { user } => vec![self.key(user, List::Producers)],
            SocialStep::Post { user } => vec![self.key(user, List::Posts)],
            SocialStep::Follow { user, followed } => {
                vec![self.key(user, List::Producers), self.key(followed, List::Consumers)]
            }
        }
    }

    /// A timeline's second round, given what the first read: the posts of
    /// its producers (none if it follows nobody, or for another step).
    pub fn second_round(&self, step: &SocialStep, read: &[(Key, Option<Value>)]) -> Vec<Key> {
        let SocialStep::Timeline { user } = *step else { return Vec::new() };
        let key = self.key(user, List::Producers);
        let value = read.iter().find(|(k, _)| *k == key).and_then(|(_, v)| v.as_deref());
        let mut producers: Vec<User> =
            self.list(user, List::Producers, value).iter().filter_map(|id| User::parse(id)).collect();
        producers.retain(|u| u.partition < self.inner.topology.partition_count());
        producers.sort_unstable();
        producers.dedup();
        producers.into_iter().map(|p| self.key(p, List::Posts)).collect()
    }

    /// The writes of `step` given what its first round read: a post's
    /// posts with `post` appended, a follow's two lists each with the other
    /// user appended (moved to the end if already there); none for a
    /// timeline. Each value is unique by `tag` and its key.
    pub fn writes(
        &self,
        step: &SocialStep,
        read: &[(Key, Option<Value>)],
        post: &str,
        tag: &str,
    ) -> Vec<(Key, String)> {
        let value = |key: &Key| read.iter().find(|(k, _)| k == key).and_then(|(_, v)| v.as_deref());
        let mut out = Vec::new();
        let mut append = |user: User, list: List, id: String| {
            let key = self.key(user, list);
            let mut ids = self.list(user, list, value(&key));
            ids.retain(|x| *x != id);
            ids.push(id);
            let text = self.value(&ids, &format!("{tag}:{}", String::from_utf8_lossy(&key)));
            out.push((key, text));
        };
        match *step {
            SocialStep::Timeline { .. } => {}
            SocialStep::Post { user } => append(user, List::Posts, post.to_string()),
            SocialStep::Follow { user, followed } => {
                append(user, List::Producers, followed.id());
                append(followed, List::Consumers, user.id());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(partitions: u32) -> SocialKeys {
        SocialKeys::new(&Topology::full(1, partitions).unwrap(), "run/", 1000, SocialMix::default())
    }

    #[test]
    fn a_users_three_lists_live_in_its_partition() {
        for n in [1, 2, 3, 8] {
            let s = keys(n);
            let t = Topology::full(1, n).unwrap();
            for p in 0..n {
                for i in [0, 1, 999] {
                    let user = User { partition: p, index: i };
                    let names: Vec<Key> =
                        [List::Posts, List::Producers, List::Consumers].iter().map(|&l| s.key(user, l)).collect();
                    for k in &names {
                        assert_eq!(t.partition_of(k), PartitionId(p), "{k:?} of {user:?} with {n} partitions");
                        assert!(k.starts_with(b"run/u"), "{k:?}");
                    }
                    assert!(names[0] != names[1] && names[1] != names[2] && names[0] != names[2]);
                    assert_eq!(s.key(user, List::Posts), names[0], "the same name every time");
                }
            }
        }
        assert_eq!(User::parse(&User { partition: 3, index: 41 }.id()), Some(User { partition: 3, index: 41 }));
        assert_eq!(User::parse("x"), None);
    }

    #[test]
    fn users_start_following_half_in_their_partition_half_elsewhere() {
        let s = keys(2);
        for i in 0..200 {
            let u = User { partition: 1, index: i };
            let d = s.default_producers(u);
            assert!(d.len() >= 3 && d.len() <= 4 && !d.contains(&u), "{d:?}");
            assert!(d.iter().any(|p| p.partition == 1) && d.iter().any(|p| p.partition == 0), "{d:?}");
            assert_eq!(d, s.default_producers(u), "drawn from the id");
        }
        let one = keys(1);
        assert!(one.default_producers(User { partition: 0, index: 5 }).iter().all(|p| p.partition == 0));
    }

    #[test]
    fn lists_append_keep_the_newest_and_stay_unique_by_tag() {
        let s = keys(2);
        let (u, v) = (User { partition: 0, index: 1 }, User { partition: 1, index: 2 });
        let follow = SocialStep::Follow { user: u, followed: v };
        let first = s.first_round(&follow);
        assert_eq!(first, vec![s.key(u, List::Producers), s.key(v, List::Consumers)]);
        let read: Vec<(Key, Option<Value>)> = first.iter().map(|k| (k.clone(), None)).collect();
        let writes = s.writes(&follow, &read, "unused", "t1");
        assert_eq!(writes.len(), 2);
        let producers = SocialKeys::parse(Some(writes[0].1.as_bytes()), Vec::new);
        let mut want: Vec<String> = s.default_producers(u).into_iter().map(User::id).collect();
        want.push(v.id());
        assert_eq!(producers, want, "the defaults, then v");
        assert_eq!(SocialKeys::parse(Some(writes[1].1.as_bytes()), Vec::new), vec![u.id()]);
        assert_ne!(writes[0].1, s.writes(&follow, &read, "unused", "t2")[0].1, "values differ by tag");
        // Posts keep the newest 8.
        let post = SocialStep::Post { user: u };
        let mut value: Option<Value> = None;
        for n in 0..12 {
            let read = vec![(s.key(u, List::Posts), value.clone())];
            let w = s.writes(&post, &read, &format!("p{n}"), &format!("t{n}"));
            assert_eq!(w.len(), 1);
            value = Some(Value::from(w[0].1.clone()));
        }
        let ids = SocialKeys::parse(value.as_deref(), Vec::new);
        assert_eq!(ids, (4..12).map(|n| format!("p{n}")).collect::<Vec<_>>());
        // A timeline reads the posts of whom it follows, nothing else.
        let timeline = SocialStep::Timeline { user: u };
        assert!(s.writes(&timeline, &[], "p", "t").is_empty());
        let second = s.second_round(&timeline, &[(s.key(u, List::Producers), None)]);
        let mut posts: Vec<Key> = s.default_producers(u).into_iter().map(|p| s.key(p, List::Posts)).collect();
        posts.sort();
        let mut got = second.clone();
        got.sort();
        assert_eq!(got, posts);
        let followed_none = s.value(&[], "t");
        assert!(s.second_round(&timeline, &[(s.key(u, List::Producers), Some(followed_none.into()))]).is_empty());
    }

    #[test]
    fn bad_mixes_are_named() {
        assert_eq!(SocialMix::default().validate(), Ok(()));
        assert!(SocialMix { timeline_ppm: 950_000, ..SocialMix::default() }.validate().is_err());
        assert!(SocialMix { list_len: 0, ..SocialMix::default() }.validate().is_err());
        assert!(SocialMix { default_producers: 9, ..SocialMix::default() }.validate().is_err());
    }
}

//! [`ConfigTexts`]: the pools' configuration texts one run of the diff makes, and the
//! question whether a pool's recorded text is the spec's ([`AsRecorded`]: answered before
//! the diff, beside the clouds' reads).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::json_text::JsonText;
use crate::spec::Spec;
use crate::spec::model::GpuPool;
use crate::state::State;

/// Whether each pool's recorded configuration is the spec's own text
/// ([`ConfigTexts::recorded`]'s answer), asked before the diff: `engine::gather` asks it
/// on a thread of its own while the clouds are read, until the reads are done, so the
/// diff, which waits for those reads, only looks up the answers found by then (and asks
/// the rest itself).
///
/// An answer holds for the very pool and text it was found for, known by where they lie in
/// memory: the spec and the state are borrowed, unchanged, for the whole plan, so while
/// they live no other pool or text lies there. Any other pool or text (a floating pool
/// placed anew in a copy of the spec) has no answer and is asked as before.
#[derive(Debug, Default)]
pub struct AsRecorded(HashMap<(usize, usize), bool>);

impl AsRecorded {
    /// The answer for every pool of `spec` that `state` records with a configuration.
    pub fn of(spec: &Spec, state: &State) -> Self {
        Self::until(spec, state, &AtomicBool::new(false))
    }

    /// [`AsRecorded::of`], for the pools reached before `stop` is set.
    pub fn until(spec: &Spec, state: &State, stop: &AtomicBool) -> Self {
        let mut scratch = Vec::new();
        let mut answers = HashMap::with_capacity(spec.gpu_pools.len());
        for (addr, pool) in &spec.gpu_pools {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let Some(config) = state.resources.get(&addr.to_string()).map(|r| &r.config) else { continue };
            if !config.is_null() {
                answers.insert(key(pool, config), config.is_text_of(&**pool, &mut scratch));
            }
        }
        AsRecorded(answers)
    }

    /// How many pools were found as recorded, and how many not.
    #[cfg(test)]
    pub(crate) fn answers(&self) -> (usize, usize) {
        let yes = self.0.values().filter(|&&a| a).count();
        (yes, self.0.len() - yes)
    }

    /// The answer found for `pool` and `recorded`, if one was.
    pub(crate) fn answer(&self, pool: &GpuPool, recorded: &JsonText) -> Option<bool> {
        self.0.get(&key(pool, recorded)).copied()
    }
}

/// Where a pool and a text lie (a text's clones share it).
fn key(pool: &GpuPool, text: &JsonText) -> (usize, usize) {
    (std::ptr::from_ref(pool) as usize, text.as_str().as_ptr() as usize)
}

/// Pools' configuration texts made in one run of the diff (one thread's addresses): pools
/// of one shape get one text, shared, rather than a copy each.
#[derive(Default)]
pub(crate) struct ConfigTexts {
    made: HashSet<SharedText>,
    /// Where [`ConfigTexts::recorded`] writes a pool's text to compare it.
    scratch: Vec<u8>,
}

impl ConfigTexts {
    /// `JsonText::to_json(pool)`, shared with an equal one made before.
    pub fn of(&mut self, pool: &GpuPool) -> serde_json::Result<JsonText> {
        let text = JsonText::to_json(pool)?;
        if let Some(SharedText(seen)) = self.made.get(text.as_str()) {
            return Ok(seen.clone());
        }
        self.made.insert(SharedText(text.clone()));
        Ok(text)
    }

    /// Is `recorded` the text [`ConfigTexts::of`] would make of `pool`? Asked without
    /// making (or hashing) a text: most pools of a plan are as recorded.
    pub fn recorded(&mut self, recorded: &JsonText, pool: &GpuPool) -> bool {
        recorded.is_text_of(pool, &mut self.scratch)
    }
}

/// A text in [`ConfigTexts`], found by its `str`.
struct SharedText(JsonText);

impl std::borrow::Borrow<str> for SharedText {
    fn borrow(&self) -> &str {
        self.0.as_str()
    }
}

impl std::hash::Hash for SharedText {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.as_str().hash(h)
    }
}

impl PartialEq for SharedText {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

impl Eq for SharedText {}

#[cfg(test)]
mod tests {
    use super::super::tests::{SPEC, World, node, resource, shape_of, spec, train, with_cx};
    use super::super::{before_counts, configs, pool_change};
    use super::{AsRecorded, ConfigTexts};
    use crate::catalog;
    use crate::json_text::JsonText;
    use crate::providers::Capacity;

    /// The answers found before the diff are [`ConfigTexts::recorded`]'s, each for the
    /// very pool and text it was found for: a copy of the pool (a floating pool placed
    /// in a copy of the spec) or an equal text read on its own has none, and is asked again.
    #[test]
    fn answers_found_before_the_diff_hold_for_their_own_pool_and_text() {
        let plain = SPEC.replace("  lifecycle {\n    ignore_changes = [\"labels\"]\n  }\n", "");
        let text = JsonText::to_json(&spec(&plain).gpu_pools[&train()]).unwrap();
        let other = JsonText::to_json(&spec(SPEC).gpu_pools[&train()]).unwrap();
        for (recorded, equal) in [(text, true), (other, false)] {
            let mut world = World::new(Some(resource(recorded.to_value(), vec![])), None);
            world.spec = spec(&plain);
            let input = world.input();
            let (pool, config) = (&*input.spec.gpu_pools[&train()], &input.state.resources["gpu_pool.train"].config);
            let known = AsRecorded::of(input.spec, input.state);
            assert_eq!(known.answer(pool, config), Some(equal));
            assert_eq!(ConfigTexts::default().recorded(config, pool), equal);
            assert_eq!(known.answer(pool, &config.clone()), Some(equal), "a clone shares the text");
            assert_eq!(known.answer(&pool.clone(), config), None);
            assert_eq!(known.answer(pool, &JsonText::parse(config.as_str()).unwrap()), None);
            let stopped = AsRecorded::until(input.spec, input.state, &std::sync::atomic::AtomicBool::new(true));
            assert_eq!(stopped.answer(pool, config), None, "asked after the stop: no answer");
        }
    }

    /// A pool whose recorded configuration is the spec's own text is found so without its
    /// text being made, and planned as the text-making way plans it: no change, the state's
    /// copy as "after", the recorded GPUs per node. Anything that edits the spec's text
    /// (an ignored path, the autoscaler's count) or a text that differs goes that way.
    #[test]
    fn a_pool_as_recorded_is_found_so_and_planned_as_before() {
        let plain = SPEC.replace("  lifecycle {\n    ignore_changes = [\"labels\"]\n  }\n", "");
        assert_ne!(plain, SPEC, "the test spec has ignore_changes");
        let live = vec![node("i-1", "us-east-1a", Capacity::OnDemand), node("i-2", "us-east-1b", Capacity::Spot)];
        let world_with = |text: &str, recorded: Option<serde_json::Value>| {
            let mut world = World::new(None, None);
            world.spec = spec(text);
            let cfg =
                recorded.unwrap_or_else(|| JsonText::to_json(&world.spec.gpu_pools[&train()]).unwrap().to_value());
            let mut world = World::new(Some(resource(cfg, live.clone())), None);
            world.spec = spec(text);
            world
        };
        let world = world_with(&plain, None);
        let (recorded, changed, shared, counts) = with_cx(&world, true, false, |cx| {
            let c = configs(cx);
            let (b, a) = (c.before.clone().unwrap(), c.after.clone().unwrap());
            let mut plan = crate::plan::diff::plan(&world.input()).expect("the state's keys are addresses");
            let change = pool_change(cx, catalog::catalog(), &mut plan).expect("a change");
            let want = before_counts(&cx.live, Some(&b), Some(&shape_of(&world)));
            (c.as_recorded, c.changed, b.as_str().as_ptr() == a.as_str().as_ptr(), (change.pool.unwrap().before, want))
        });
        assert!(recorded && changed.is_empty() && shared);
        assert_eq!(counts.0, counts.1);
        assert_eq!((counts.0.on_demand, counts.0.spot, counts.0.gpus_per_node), (1, 1, 8));

        // The autoscaler owns the count: the text is made and edited, as before.
        let c = with_cx(&world, true, true, |cx| {
            let c = configs(cx);
            (c.as_recorded, c.changed.clone(), c.owned)
        });
        assert_eq!(c, (false, vec![], Some(4)));
        // `ignore_changes` names a path: the text is made, and still equal.
        let world = world_with(SPEC, None);
        let c = with_cx(&world, true, false, |cx| {
            let c = configs(cx);
            (c.as_recorded, c.changed.clone(), c.before == c.after)
        });
        assert_eq!(c, (false, vec![], true));
        // A recorded text that differs: the path that changed.
        let mut other = JsonText::to_json(&spec(&plain).gpu_pools[&train()]).unwrap().to_value();
        other["gpus_per_node"] = serde_json::json!(4);
        let world = world_with(&plain, Some(other));
        let c = with_cx(&world, true, false, |cx| {
            let c = configs(cx);
            let counts = before_counts(&cx.live, c.before.as_ref(), None);
            (c.as_recorded, c.changed.clone(), counts.gpus_per_node)
        });
        assert_eq!(c, (false, vec!["gpus_per_node".to_string()], 4));
    }
}

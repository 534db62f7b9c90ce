//! The GPU instance catalog: data files, one per cloud, loaded with `include_str!`.

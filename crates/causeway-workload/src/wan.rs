//! The WAN model: where DCs are and how far apart. DC `i` sits in region `i`
//! of the model; the simulator draws latencies from it, and the runtime's
//! WAN emulation delays messages between DCs by half a round trip.

use serde::Deserialize;
use std::collections::BTreeMap;
use thiserror::Error;

/// The default WAN model, read from the repository's `config/wan.toml`.
pub const DEFAULT_WAN_TOML: &str = include_str!("../../../config/wan.toml");

/// What is wrong with a WAN file.
#[derive(Debug, Error, PartialEq)]
pub enum WanError {
    #[error("WAN file: {0}")]
    Syntax(String),
    #[error("WAN file: region {0:?} appears twice")]
    DuplicateRegion(String),
    #[error("WAN file: unknown region {0:?} in rtt_ms")]
    UnknownRegion(String),
    #[error("WAN file: no round-trip time between {0} and {1}")]
    MissingRtt(String, String),
    #[error("WAN file: bad rtt {ms} between {a} and {b}")]
    BadRtt { a: String, b: String, ms: f64 },
    #[error("WAN file: intra_dc_one_way_us must be [min, max] with 0 < min <= max")]
    BadIntraDc,
    #[error("WAN file: jitter must be in [0, 1)")]
    BadJitter,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WanFile {
    regions: Vec<String>,
    intra_dc_one_way_us: [u64; 2],
    jitter: f64,
    rtt_ms: BTreeMap<String, BTreeMap<String, f64>>,
}

/// Latencies between and inside DCs.
#[derive(Clone, Debug, PartialEq)]
pub struct WanModel {
    pub regions: Vec<String>,
    /// Round-trip times in microseconds, `rtt_us[a][b]`, symmetric.
    pub rtt_us: Vec<Vec<u64>>,
    pub intra_dc_one_way_us: (u64, u64),
    pub jitter: f64,
}

impl WanModel {
    pub fn parse(text: &str) -> Result<WanModel, WanError> {
        let file: WanFile = toml::from_str(text).map_err(|e| WanError::Syntax(e.to_string()))?;
        let n = file.regions.len();
        let index = |name: &str| file.regions.iter().position(|r| r == name);
        for (i, r) in file.regions.iter().enumerate() {
            if file.regions[..i].contains(r) {
                return Err(WanError::DuplicateRegion(r.clone()));
            }
        }
        let mut rtt = vec![vec![None; n]; n];
        for (a, row) in &file.rtt_ms {
            let i = index(a).ok_or_else(|| WanError::UnknownRegion(a.clone()))?;
            for (b, ms) in row {
                let j = index(b).ok_or_else(|| WanError::UnknownRegion(b.clone()))?;
                if !ms.is_finite() || *ms < 0.0 {
                    return Err(WanError::BadRtt { a: a.clone(), b: b.clone(), ms: *ms });
                }
                let us = (ms * 1000.0).round() as u64;
                rtt[i][j] = Some(us);
                rtt[j][i] = Some(us);
            }
        }
        let mut rtt_us = vec![vec![0; n]; n];
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    rtt_us[i][j] = rtt[i][j]
                        .ok_or_else(|| WanError::MissingRtt(file.regions[i].clone(), file.regions[j].clone()))?;
                }
            }
        }
        let [lo, hi] = file.intra_dc_one_way_us;
        if lo == 0 || lo > hi {
            return Err(WanError::BadIntraDc);
        }
        if !(0.0..1.0).contains(&file.jitter) {
            return Err(WanError::BadJitter);
        }
        Ok(WanModel { regions: file.regions, rtt_us, intra_dc_one_way_us: (lo, hi), jitter: file.jitter })
    }

    pub fn default_model() -> WanModel {
        WanModel::parse(DEFAULT_WAN_TOML).expect("the bundled WAN model is valid")
    }

    /// No WAN: `dcs` DCs, each in a region of its own, as near each other as
    /// the servers inside one DC of this model (one way between DCs, its
    /// slowest intra-DC latency).
    pub fn without_wan(&self, dcs: u16) -> WanModel {
        let n = usize::from(dcs);
        let rtt = 2 * self.intra_dc_one_way_us.1;
        WanModel {
            regions: (0..n).map(|i| format!("dc{i}")).collect(),
            rtt_us: (0..n).map(|a| (0..n).map(|b| if a == b { 0 } else { rtt }).collect()).collect(),
            intra_dc_one_way_us: self.intra_dc_one_way_us,
            jitter: self.jitter,
        }
    }

    /// The round-trip times between the first `dcs` regions, in
    /// microseconds (`[from][to]`): DC `i` in region `i`.
    pub fn rtt_matrix(&self, dcs: u16) -> Result<Vec<Vec<u64>>, String> {
        let n = usize::from(dcs);
        if n > self.regions.len() {
            return Err(format!("{n} DCs, but the WAN model has {} regions", self.regions.len()));
        }
        Ok(self.rtt_us[..n].iter().map(|row| row[..n].to_vec()).collect())
    }

    /// The model in `path`, or the bundled one; errors name the file.
    pub fn load(path: Option<&std::path::Path>) -> Result<WanModel, String> {
        let Some(path) = path else { return Ok(WanModel::default_model()) };
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        WanModel::parse(&text).map_err(|e| format!("in {}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_wan_model_has_the_design_table() {
        let wan = WanModel::default_model();
        assert_eq!(wan.regions.len(), 5);
        assert_eq!(wan.rtt_us[0][1], 70_000);
        assert_eq!(wan.rtt_us[2][0], 75_000);
        assert_eq!(wan.rtt_us[2][4], 270_000);
        assert_eq!(wan.rtt_us[3][4], 145_000);
    }

    #[test]
    fn the_ten_region_file_extends_the_default_one() {
        let ten = WanModel::parse(include_str!("../../../config/wan-10.toml")).expect("config/wan-10.toml parses");
        let five = WanModel::default_model();
        assert_eq!(ten.regions.len(), 10);
        assert_eq!(ten.regions[..5], five.regions[..], "the same first five regions, in order");
        for (a, row) in five.rtt_us.iter().enumerate() {
            assert_eq!(ten.rtt_us[a][..5], row[..], "the same round trips among the first five ({})", five.regions[a]);
        }
    }

    #[test]
    fn without_wan_dcs_are_as_near_as_servers_in_one_dc() {
        let flat = WanModel::default_model().without_wan(7);
        assert_eq!(flat.regions.len(), 7);
        assert_eq!(flat.rtt_us[0][6], 500);
        assert_eq!(flat.rtt_us[3][3], 0);
        assert_eq!(flat.intra_dc_one_way_us, (50, 250));
    }

    #[test]
    fn wan_errors_say_what_is_wrong() {
        let bad = DEFAULT_WAN_TOML.replace("mumbai = { sydney = 145 }", "");
        assert_eq!(WanModel::parse(&bad), Err(WanError::MissingRtt("mumbai".into(), "sydney".into())));
        let bad = DEFAULT_WAN_TOML.replace("oregon = { ireland", "atlantis = { ireland");
        assert_eq!(WanModel::parse(&bad), Err(WanError::UnknownRegion("atlantis".into())));
        assert!(matches!(WanModel::parse("regions = 3"), Err(WanError::Syntax(_))));
    }
}

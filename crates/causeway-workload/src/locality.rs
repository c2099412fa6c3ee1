//! The locality of transactions under partial replication (the PaRiS
//! paper's "local-DC:multi-DC" ratio): how many transactions touch only
//! partitions the client's DC holds, against how many touch random
//! partitions anywhere.

use std::fmt;
use std::str::FromStr;

/// `local:multi`, as users write it: `95:5` is the paper's default; `100:0`,
/// `90:10` and `50:50` its other points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Locality {
    pub local: u32,
    pub multi: u32,
}

impl Locality {
    /// The share of multi-DC transactions.
    pub fn multi_dc_fraction(self) -> f64 {
        f64::from(self.multi) / f64::from(self.local + self.multi)
    }
}

impl Default for Locality {
    fn default() -> Self {
        Locality { local: 95, multi: 5 }
    }
}

impl FromStr for Locality {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?}: give the locality as LOCAL:MULTI, two whole numbers such as 95:5 or 100:0");
        let (local, multi) = s.split_once(':').ok_or_else(bad)?;
        let (local, multi): (u32, u32) =
            (local.trim().parse().map_err(|_| bad())?, multi.trim().parse().map_err(|_| bad())?);
        if local.checked_add(multi).is_none_or(|sum| sum == 0) {
            return Err(bad());
        }
        Ok(Locality { local, multi })
    }
}

impl fmt::Display for Locality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.local, self.multi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_parse_and_bad_ones_are_named() {
        assert_eq!("95:5".parse::<Locality>().unwrap().multi_dc_fraction(), 0.05);
        assert_eq!("100:0".parse::<Locality>().unwrap().multi_dc_fraction(), 0.0);
        assert_eq!("50:50".parse::<Locality>().unwrap().to_string(), "50:50");
        for bad in ["95", "0:0", "a:b", "95:-5", ""] {
            assert!(bad.parse::<Locality>().unwrap_err().contains("LOCAL:MULTI"), "{bad}");
        }
    }
}

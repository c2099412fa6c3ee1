use causeway_protocol::wren::{Wren, WrenConfig};
use causeway_sim::*;
#[test]
fn smoke() {
    let cfg = SimConfig {
        txns: Some(20000),
        cuts: vec![Cut { dc: 1, start_us: 100_000, end_us: 400_000 }],
        ..SimConfig::default()
    };
    let r = Simulation::<Wren>::new(cfg, &WrenConfig::default()).unwrap().run();
    println!("{r}");
    let h = r.history.to_jsonl_string();
    println!("{}", &h[..1500]);
    println!("{}", h.lines().last().unwrap().len());
}

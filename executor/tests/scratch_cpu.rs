use executor::*;
fn cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    s.split_whitespace().next().unwrap().parse().unwrap()
}
#[test]
#[ignore]
fn cpu() {
    let g = Genesis::generate(2, 1_000_000_000, 0);
    let script = MoveExecutor::transfer_script().unwrap();
    let keys: Vec<_> = g.accounts.iter().map(|a| a.public_key).collect();
    let addrs: Vec<_> = g.accounts.iter().map(|a| a.address()).collect();
    let n: u64 = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(300_000);
    let txs: Vec<Transaction> = (0..n).map(|i| {
        let f = (i % 2) as usize;
        Transaction::unsigned(keys[f], i / 2, Payload::Move { script: script.clone(), destination: addrs[1 - f], amount: 1 })
    }).collect();
    let native_txs: Vec<Transaction> = txs.iter().map(|t| { let mut t = t.clone(); t.payload = Payload::Native { destination: t.payload.destination(), amount: 1 }; t }).collect();
    let phase = std::env::var("PHASE").unwrap_or_default();
    if phase == "none" { return; }
    let mut ex = MoveExecutor::from_genesis(&g).unwrap();
    if phase == "genesis" { return; }
    let (c, w) = (cpu_ns(), std::time::Instant::now());
    for t in &txs { assert!(ex.execute(t).is_executed()); }
    let (c, w) = (cpu_ns() - c, w.elapsed());
    println!("move execute: cpu {:.0} ns/tx => {:.0} tx/s (wall {:.0} ns/tx)", c as f64 / n as f64, n as f64 * 1e9 / c as f64, w.as_nanos() as f64 / n as f64);
    if phase == "move" { return; }
    let mut ledger = Ledger::from_genesis(MoveExecutor::from_genesis(&g).unwrap(), &g, 10);
    let mut done = Vec::new();
    let (c, w) = (cpu_ns(), std::time::Instant::now());
    for t in txs { done.clear(); ledger.apply_into(t, &mut done).unwrap(); }
    let (c, w) = (cpu_ns() - c, w.elapsed());
    println!("move ledger: cpu {:.0} ns/tx => {:.0} tx/s (wall {:.0} ns/tx) executed {}", c as f64 / n as f64, n as f64 * 1e9 / c as f64, w.as_nanos() as f64 / n as f64, ledger.stats().executed);
    let mut ledger = Ledger::from_genesis(NativeExecutor::from_genesis(&g).unwrap(), &g, 10);
    let (c, w) = (cpu_ns(), std::time::Instant::now());
    for t in native_txs { done.clear(); ledger.apply_into(t, &mut done).unwrap(); }
    let (c, w) = (cpu_ns() - c, w.elapsed());
    println!("native ledger: cpu {:.0} ns/tx => {:.0} tx/s (wall {:.0} ns/tx)", c as f64 / n as f64, n as f64 * 1e9 / c as f64, w.as_nanos() as f64 / n as f64);
}

//! The wire contract beside the Rust code: the TypeScript types callers
//! compile against name every error code the relay can answer with.

use durable_relay::ErrorCode;

#[test]
fn the_typescript_error_codes_are_the_rust_ones() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../clients/typescript/durable-relay.d.ts");
    let dts = std::fs::read_to_string(path).expect("clients/typescript/durable-relay.d.ts");
    let start = dts.find("export type ErrorCode =").expect("an ErrorCode union");
    let end = start + dts[start..].find(';').expect("the union's end");
    let union: Vec<&str> = dts[start..end].split('"').skip(1).step_by(2).collect();
    let rust: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(union, rust, "clients/typescript/durable-relay.d.ts ErrorCode vs ErrorCode::ALL");
}

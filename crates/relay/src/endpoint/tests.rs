//! The endpoint table's checks, at and past each limit, and the meaning of
//! each kind of answer.

use std::collections::HashMap;

use super::*;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn read(vars: &[(&str, &str)]) -> Result<Endpoints, ConfigError> {
    let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    endpoints(&|k| map.get(k).cloned(), 30_000)
}

fn one(entry: &str, env: &str) -> Result<Endpoints, ConfigError> {
    read(&[(ENDPOINTS_VAR, &format!(r#"{{"hook":{entry}}}"#)), ("RELAY_ENV", env), ("HOOK_SECRET", SECRET)])
}

fn refusal(entry: &str, env: &str) -> String {
    one(entry, env).expect_err(entry).message
}

#[test]
fn an_endpoint_is_read_with_its_defaults() {
    let e = one(&format!(r#"{{"url":"https://hooks.example.com/in","secret":"{SECRET}"}}"#), "production")
        .unwrap();
    let hook = &e["hook"];
    assert_eq!(hook.url, "https://hooks.example.com/in");
    assert_eq!(hook.timeout_ms, 30_000);
    assert!(hook.headers.is_empty());
    assert_eq!(hook.keys, vec![parse_secret(SECRET).unwrap()]);
    assert!(read(&[]).unwrap().is_empty());
    assert!(read(&[(ENDPOINTS_VAR, " ")]).unwrap().is_empty());
}

#[test]
fn an_endpoint_signs_with_two_secrets_while_rotating_and_no_more() {
    const OLD: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    let two =
        one(&format!(r#"{{"url":"https://h.example/","secret":"{SECRET}  {OLD}"}}"#), "production").unwrap();
    let keys = &two["hook"].keys;
    assert_eq!(keys, &vec![parse_secret(SECRET).unwrap(), parse_secret(OLD).unwrap()]);
    assert_eq!(keys.len() as u32, MAX_ENDPOINT_SECRETS);
    let header = signatures(keys, "msg_1", 7, "{}");
    let each: Vec<String> = keys.iter().map(|k| signature(k, "msg_1", 7, "{}")).collect();
    assert_eq!(header, each.join(" "), "one v1 signature per secret, separated by a space");
    let three =
        refusal(&format!(r#"{{"url":"https://h.example/","secret":"{SECRET} {OLD} {SECRET}"}}"#), "test");
    assert!(three.contains("3 secrets"), "{three}");
    let none = refusal(r#"{"url":"https://h.example/","secret":"  "}"#, "test");
    assert!(none.contains("0 secrets"), "{none}");
    let bad =
        refusal(&format!(r#"{{"url":"https://h.example/","secret":"{SECRET} whsec_c2hvcnQ="}}"#), "test");
    assert!(!bad.contains(SECRET.trim_start_matches("whsec_")), "the good secret is not echoed: {bad}");
}

#[test]
fn a_secret_can_come_from_another_variable() {
    let e = one(r#"{"url":"https://h.example/","secret_var":"HOOK_SECRET","timeout_ms":100}"#, "production")
        .unwrap();
    assert_eq!(e["hook"].keys, vec![parse_secret(SECRET).unwrap()]);
    assert_eq!(e["hook"].timeout_ms, 100);
    assert!(refusal(r#"{"url":"https://h.example/","secret_var":"MISSING"}"#, "test").contains("MISSING"));
    let both = format!(r#"{{"url":"https://h.example/","secret":"{SECRET}","secret_var":"HOOK_SECRET"}}"#);
    assert!(refusal(&both, "test").contains("exactly one"));
    assert!(refusal(r#"{"url":"https://h.example/"}"#, "test").contains("exactly one"));
}

#[test]
fn urls_are_https_named_hosts_in_production() {
    let with = |url: &str| format!(r#"{{"url":"{url}","secret":"{SECRET}"}}"#);
    assert!(refusal(&with("http://h.example/"), "production").contains("https"));
    assert!(one(&with("http://127.0.0.1:9999/in"), "test").is_ok());
    assert!(refusal(&with("https://127.0.0.1/in"), "production").contains("IP address"));
    assert!(refusal(&with("https://[::1]/in"), "production").contains("IP address"));
    assert!(refusal(&with("ftp://h.example/"), "test").contains("scheme"));
    assert!(refusal(&with("https://user:pw@h.example/"), "production").contains("credentials"));
    assert!(refusal(&with("not a url"), "test").contains("url"));
    // Unset RELAY_ENV is production.
    let unset = read(&[(ENDPOINTS_VAR, &format!(r#"{{"hook":{}}}"#, with("http://h.example/")))]);
    assert!(unset.unwrap_err().message.contains("https"));
    let at = format!("https://h.example/{}", "a".repeat(MAX_ENDPOINT_URL_BYTES as usize - 18));
    assert_eq!(at.len(), MAX_ENDPOINT_URL_BYTES as usize);
    assert!(one(&with(&at), "production").is_ok());
    assert!(refusal(&with(&format!("{at}a")), "production").contains("at most"));
}

#[test]
fn secrets_and_timeouts_are_checked() {
    let short = r#"{"url":"https://h.example/","secret":"whsec_AAAA"}"#;
    assert!(refusal(short, "test").contains("bytes"));
    let message = refusal(r#"{"url":"https://h.example/","secret":"whsec_!!"}"#, "test");
    assert!(message.contains("base64") && !message.contains("!!"), "{message}");
    for (timeout, ok) in [(99, false), (100, true), (120_000, true), (120_001, false)] {
        let e = format!(r#"{{"url":"https://h.example/","secret":"{SECRET}","timeout_ms":{timeout}}}"#);
        assert_eq!(one(&e, "test").is_ok(), ok, "{timeout}");
    }
}

#[test]
fn extra_headers_are_checked_and_lower_cased() {
    let with = |h: &str| format!(r#"{{"url":"https://h.example/","secret":"{SECRET}","headers":{h}}}"#);
    let e = one(&with(r#"{"X-Tenant":"acme"}"#), "test").unwrap();
    assert_eq!(e["hook"].headers, vec![("x-tenant".to_string(), "acme".to_string())]);
    for reserved in ["Content-Type", "host", "webhook-id", "Webhook-Signature", "traceparent", "user-agent"] {
        assert!(
            refusal(&with(&format!(r#"{{"{reserved}":"x"}}"#)), "test").contains("relay itself"),
            "{reserved}"
        );
    }
    assert!(refusal(&with(r#"{"a b":"x"}"#), "test").contains("not a header name"));
    assert!(refusal(&with(r#"{"x":"a\nb"}"#), "test").contains("control"));
    assert!(refusal(&with(r#"{"X-A":"1","x-a":"2"}"#), "test").contains("twice"));
    let many: Vec<String> = (0..=MAX_ENDPOINT_HEADERS).map(|i| format!(r#""x-{i}":"v""#)).collect();
    let fits = format!("{{{}}}", many[..MAX_ENDPOINT_HEADERS as usize].join(","));
    assert!(one(&with(&fits), "test").is_ok());
    assert!(refusal(&with(&format!("{{{}}}", many.join(","))), "test").contains("at most"));
    let long = |n: usize| with(&format!(r#"{{"x":"{}"}}"#, "v".repeat(n)));
    assert!(one(&long(MAX_ENDPOINT_HEADER_BYTES as usize - 1), "test").is_ok());
    assert!(refusal(&long(MAX_ENDPOINT_HEADER_BYTES as usize), "test").contains("bytes"));
}

#[test]
fn the_table_is_bounded_and_its_names_are_target_names() {
    let entry = format!(r#"{{"url":"https://h.example/","secret":"{SECRET}"}}"#);
    let table = |n: u32| {
        let all: Vec<String> = (0..n).map(|i| format!(r#""e{i}":{entry}"#)).collect();
        read(&[(ENDPOINTS_VAR, &format!("{{{}}}", all.join(",")))])
    };
    assert_eq!(table(MAX_ENDPOINTS).unwrap().len(), MAX_ENDPOINTS as usize);
    assert!(table(MAX_ENDPOINTS + 1).unwrap_err().message.contains("at most"));
    let named = |name: &str| read(&[(ENDPOINTS_VAR, &format!(r#"{{"{name}":{entry}}}"#))]);
    let longest = "n".repeat(crate::core::MAX_NAME_BYTES as usize - ENDPOINT_PREFIX.len());
    assert!(named(&longest).is_ok());
    assert!(named(&format!("{longest}n")).is_err());
    assert!(named("a/b").is_err());
    assert!(named("").is_err());
    assert!(read(&[(ENDPOINTS_VAR, "[1]")]).unwrap_err().message.contains("not an object"));
    let unknown = format!(r#"{{"hook":{{"url":"https://h.example/","secret":"{SECRET}","retries":3}}}}"#);
    assert!(read(&[(ENDPOINTS_VAR, &unknown)]).unwrap_err().message.contains("retries"));
    let batched = format!(r#"{{"hook":{{"url":"https://h.example/","secret":"{SECRET}","batch":true}}}}"#);
    assert!(read(&[(ENDPOINTS_VAR, &batched)]).unwrap()["hook"].batch);
    assert!(
        !read(&[(ENDPOINTS_VAR, &format!(r#"{{"hook":{entry}}}"#))]).unwrap()["hook"].batch,
        "off by default"
    );
}

#[test]
fn answers_map_to_outcomes() {
    assert_eq!(outcome_of(200, 7, 1, None), CallOutcome::Applied { watermark: 7, applied: 1 });
    assert_eq!(outcome_of(204, 7, 1, Some(5)), CallOutcome::Applied { watermark: 7, applied: 1 });
    let kind = |status| match outcome_of(status, 1, 1, None) {
        CallOutcome::Applied { .. } => "delivered",
        CallOutcome::Failed(Failure::Overloaded(_)) => "overloaded",
        CallOutcome::Failed(Failure::Transient(_)) => "transient",
        CallOutcome::Failed(Failure::Permanent(_)) => "permanent",
        CallOutcome::Failed(Failure::Interrupted(_)) => "interrupted",
        CallOutcome::Throttled { .. } => "throttled",
    };
    for (status, want) in [
        (299, "delivered"),
        (429, "overloaded"),
        (503, "overloaded"),
        (500, "transient"),
        (502, "transient"),
        (504, "transient"),
        (408, "transient"),
        (301, "permanent"),
        (400, "permanent"),
        (404, "permanent"),
        (410, "permanent"),
        (100, "permanent"),
    ] {
        assert_eq!(kind(status), want, "{status}");
    }
}

#[test]
fn a_batch_taken_delivers_all_its_rows() {
    assert_eq!(outcome_of(200, 12, 5, None), CallOutcome::Applied { watermark: 12, applied: 5 });
}

#[test]
fn a_pause_asked_for_throttles_retryable_answers_only() {
    let throttled = |status| {
        matches!(outcome_of(status, 1, 1, Some(3_000)), CallOutcome::Throttled { retry_after_ms: 3_000, .. })
    };
    for status in [429, 503, 500, 502, 408] {
        assert!(throttled(status), "{status}");
    }
    for status in [400, 404, 301] {
        assert!(
            matches!(outcome_of(status, 1, 1, Some(3_000)), CallOutcome::Failed(Failure::Permanent(_))),
            "{status}"
        );
    }
}

#[test]
fn retry_after_is_read_as_seconds_or_a_date_and_bounded() {
    let never = |_: &str| None;
    assert_eq!(retry_after_ms("3", 0, never), Some(3_000));
    assert_eq!(retry_after_ms(" 0 ", 0, never), Some(0));
    let max_s = crate::core::MAX_RETRY_AFTER_MS / 1_000;
    assert_eq!(retry_after_ms(&max_s.to_string(), 0, never), Some(crate::core::MAX_RETRY_AFTER_MS));
    assert_eq!(retry_after_ms(&(max_s + 1).to_string(), 0, never), Some(crate::core::MAX_RETRY_AFTER_MS));
    assert_eq!(retry_after_ms("99999999999999999999999", 0, never), Some(crate::core::MAX_RETRY_AFTER_MS));
    assert_eq!(retry_after_ms("-1", 0, never), None);
    assert_eq!(retry_after_ms("soon", 0, never), None);
    assert_eq!(retry_after_ms("", 0, never), None);
    let date = |v: &str| (v == "Wed, 21 Oct 2015 07:28:00 GMT").then_some(1_445_412_480_000);
    assert_eq!(retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", 1_445_412_470_000, date), Some(10_000));
    assert_eq!(
        retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", 1_445_412_490_000, date),
        Some(0),
        "a date past"
    );
    assert_eq!(
        retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", 0, date),
        Some(crate::core::MAX_RETRY_AFTER_MS)
    );
}

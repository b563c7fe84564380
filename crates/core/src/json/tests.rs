//! Unit tests of the canonical value text: the spellings it keeps, the ones it
//! changes, and every input it refuses.

use super::*;

fn canon(t: &str) -> String {
    canonical(t).unwrap_or_else(|e| panic!("{t:?}: {e}"))
}

#[test]
fn numbers_are_carried_digit_for_digit() {
    assert_eq!(canon("123456789012345678901234567890"), "123456789012345678901234567890");
    assert_eq!(canon("1e400"), "1e400");
    assert_eq!(canon(" -0.100E-07 "), "-0.100E-07");
    assert_eq!(canon("[0.1, 9007199254740993]"), "[0.1,9007199254740993]");
}

#[test]
fn number_grammar_is_enforced() {
    for bad in ["01", "-", "1.", ".5", "1e", "1e+", "+1", "0x10", "NaN", "Infinity", "1 2"] {
        assert!(canonical(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn objects_are_sorted_and_whitespace_dropped() {
    assert_eq!(
        canon(r#"{ "b" : 1 , "a" : [ 1 , { "d":null, "c":true } ] }"#),
        r#"{"a":[1,{"c":true,"d":null}],"b":1}"#
    );
    assert_eq!(canon("{}"), "{}");
    assert_eq!(canon("[ ]"), "[]");
}

#[test]
fn a_key_named_twice_is_refused_even_spelled_differently() {
    assert_eq!(canonical(r#"{"a":1,"a":2}"#), Err(ValueError::DuplicateKey("a".into())));
    assert_eq!(canonical(r#"{"a":1,"\u0061":2}"#), Err(ValueError::DuplicateKey("a".into())));
}

#[test]
fn strings_are_escaped_minimally_and_nul_survives() {
    assert_eq!(canon(r#""\u0041\/\u00e9""#), "\"A/é\"");
    assert_eq!(canon(r#""a\u0000b""#), r#""a\u0000b""#);
    assert_eq!(canon(r#""\b\f\n\r\t\"\\""#), r#""\b\f\n\r\t\"\\""#);
    assert_eq!(canon("\"\u{2028}\u{1F600}\""), "\"\u{2028}\u{1F600}\"");
    assert_eq!(canon(r#""\ud83d\ude00""#), "\"\u{1F600}\"");
    assert!(canonical("\"a\nb\"").is_err(), "raw control characters are not JSON");
}

#[test]
fn lone_surrogates_are_refused() {
    for bad in [r#""\ud800""#, r#""\udc00""#, r#""\ud800x""#, r#""\ud800\u0041""#] {
        assert!(matches!(canonical(bad), Err(ValueError::LoneSurrogate(_))), "{bad}");
    }
}

#[test]
fn nesting_is_checked_at_and_past_the_limit() {
    let at = "[".repeat(MAX_VALUE_DEPTH as usize) + &"]".repeat(MAX_VALUE_DEPTH as usize);
    assert_eq!(canon(&at), at);
    let past = format!("[{at}]");
    assert_eq!(canonical(&past), Err(ValueError::TooDeep));
    let objects = "{\"a\":".repeat(MAX_VALUE_DEPTH as usize + 1) + "1" + &"}".repeat(65);
    assert_eq!(canonical(&objects), Err(ValueError::TooDeep));
    let huge = "[".repeat(100_000);
    assert_eq!(canonical(&huge), Err(ValueError::TooDeep));
}

#[test]
fn nesting_depth_ignores_brackets_in_strings() {
    assert_eq!(nesting_depth(r#"{"a":["[[[", "\"]"]}"#), 2);
    assert_eq!(nesting_depth("]]]["), 1);
    assert_eq!(nesting_depth("1"), 0);
}

#[test]
fn trailing_and_missing_input_is_refused() {
    for bad in ["", " ", "1,", "[1,]", "{\"a\":1,}", "[1", "{\"a\"", "\"abc", "tru", "nulls"] {
        assert!(canonical(bad).is_err(), "{bad:?} accepted");
    }
}

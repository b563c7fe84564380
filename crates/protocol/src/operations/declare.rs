//! `operations!`: the one declaration of an object's operations, from which
//! the crate derives, per operation, the enum's variant, its [`Operation`]
//! constant and table entry (with the path template), the arm of `parse`
//! that reads its request line, the arm of `path` that writes it, and the
//! arm of `operation()`. `source.rs` and `target.rs` each call it once.
//!
//! An operation reads, in its declaration's order:
//!
//! ```text
//! /// Doc of the variant (and of its constant).
//! Variant { /// field doc
//!           field: Type, ... }        // or Variant(name: Type) or Variant
//!     => CONSTANT {
//!     name: "...",                    // the Operation's name
//!     method: GET,                    // GET, POST or DELETE
//!     path: /"literal"/{field: Codec},// segments; a {field} is read by a PathParam
//!     query: [field: Codec, ...],     // optional; QueryParams, in the order written
//!     reach: Public, scope: Reader,   // Reach and Scope variants
//!     request: None, reply: Type, codes: &[...], // reply: a wire type
//!     rpc: None,                      // or Some(Rpc { method, unwraps, returns, doc })
//! }
//! ```
//!
//! A request line is read the way every route always read it: the path's
//! parameters first, then the query (unknown or repeated parameters
//! refused), then each query parameter in its declared order. A path is
//! written with its query parameters in that same order, leaving out those
//! whose codec writes nothing.
//!
//! [`SourceOp::parameters`](super::SourceOp::parameters) answers each
//! operation's parameters with their TypeScript types (each codec's `TS`),
//! from which the TypeScript method signatures are written.
//!
//! [`Operation`]: super::Operation

/// One segment of a declared path, in each of the forms the macro needs:
/// its pattern in `parse`'s match, its text in the template, its reading
/// and its writing.
macro_rules! segment {
    (@pattern $literal:literal) => {
        $literal
    };
    (@pattern { $field:ident : $codec:ty }) => {
        $field
    };
    (@template $literal:literal) => {
        $literal
    };
    (@template { $field:ident : $codec:ty }) => {
        concat!("{", stringify!($field), "}")
    };
    (@parse $literal:literal) => {};
    (@parse { $field:ident : $codec:ty }) => {
        let $field = <$codec as $crate::params::PathParam>::parse($field)?;
    };
    (@write $literal:literal) => {
        String::from(concat!("/", $literal))
    };
    (@write { $field:ident : $codec:ty }) => {
        format!("/{}", <$codec as $crate::params::PathParam>::write($field))
    };
    (@param $params:ident $literal:literal) => {};
    (@param $params:ident { $field:ident : $codec:ty }) => {
        $params.push(Param {
            name: stringify!($field),
            place: Place::Path,
            ts: <$codec as $crate::params::PathParam>::TS,
            max: None,
            required: true,
        });
    };
    (@sample $rng:ident $literal:literal) => {};
    (@sample $rng:ident { $field:ident : $codec:ty }) => {
        let $field = <$codec as $crate::params::PathParam>::sample($rng);
    };
}

/// The query part of a path template: `?a&b` for parameters `a b`.
macro_rules! query_template {
    () => { "" };
    ($first:ident $($rest:ident)*) => { concat!("?", stringify!($first), $("&", stringify!($rest)),*) };
}

/// Declares an object's operations; see the module's documentation.
macro_rules! operations {
    (
        $(#[$enum_doc:meta])*
        pub enum $Op:ident;
        $(#[$table_doc:meta])*
        pub const $TABLE:ident;
        $(
            $(#[$doc:meta])*
            $Variant:ident
            $(( $($arg:ident : $arg_ty:ty),* ))?
            $({ $($(#[$field_doc:meta])* $field:ident : $field_ty:ty),* $(,)? })?
            => $CONST:ident {
                name: $name:literal,
                method: $method:ident,
                path: $(/ $seg:tt)+,
                $(query: [$($query:ident : $codec:ty),* $(,)?],)?
                reach: $reach:ident,
                scope: $scope:ident,
                request: $request:expr,
                reply: $reply:ty,
                rpc: $rpc:expr,
                codes: $codes:expr $(,)?
            }
        )+
    ) => {
        $(#[$enum_doc])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum $Op {
            $(
                $(#[$doc])*
                $Variant $(( $($arg_ty),* ))? $({ $($(#[$field_doc])* $field : $field_ty),* })?,
            )+
        }

        $(
            $(#[$doc])*
            pub(crate) const $CONST: Operation = Operation {
                name: $name,
                method: stringify!($method),
                path: concat!($("/", segment!(@template $seg),)+ query_template!($($($query)*)?)),
                reach: Reach::$reach,
                scope: Scope::$scope,
                request: $request,
                reply: stringify!($reply),
                rpc: $rpc,
                codes: $codes,
            };
        )+

        $(#[$table_doc])*
        pub const $TABLE: &[Operation] = &[$($CONST),+];

        // Every reply is a wire type written as JSON: a misspelt or missing
        // one does not compile.
        const _: fn() = || {
            fn wire<T: serde::Serialize>() {}
            $(wire::<$reply>();)+
        };

        impl $Op {
            /// Parses an operation from `method` and the path `segments`
            /// after the object's own prefix.
            pub fn parse(method: &str, segments: &[&str], url: &Url) -> Result<$Op, Refusal> {
                match (method, segments) {
                    $(
                        (stringify!($method), [$(segment!(@pattern $seg)),+]) => {
                            $(segment! { @parse $seg })+
                            let [$($($query),*)?] = params(url, [$($(stringify!($query)),*)?])?;
                            $($(let $query = <$codec as QueryParam>::parse(stringify!($query), $query)?;)*)?
                            Ok($Op::$Variant $(( $($arg),* ))? $({ $($field),* })?)
                        }
                    )+
                    _ => Err(no_route(method, url)),
                }
            }

            /// The operation's path in the object's protocol, with its query.
            pub fn path(&self) -> String {
                match self {
                    $(
                        $Op::$Variant $(( $($arg),* ))? $({ $($field),* })? => with_query(
                            [$(segment!(@write $seg)),+].concat(),
                            &[$($((stringify!($query), <$codec as QueryParam>::write($query))),*)?],
                        ),
                    )+
                }
            }

            /// This operation's entry in its table.
            pub fn operation(&self) -> &'static Operation {
                match self {
                    $($Op::$Variant { .. } => &$CONST,)+
                }
            }

            /// Every operation of the table with its parameters, in the
            /// order a call passes them: the path's, then the query's.
            #[allow(unused_mut, clippy::vec_init_then_push, reason = "one push per declared parameter, which may be none")]
            pub fn parameters() -> Vec<(&'static Operation, Vec<Param>)> {
                vec![$({
                    let mut params: Vec<Param> = Vec::new();
                    $(segment! { @param params $seg })+
                    $($(params.push(Param {
                        name: stringify!($query),
                        place: Place::Query,
                        ts: <$codec as QueryParam>::TS,
                        max: <$codec as QueryParam>::MAX,
                        required: <$codec as QueryParam>::REQUIRED,
                    });)*)?
                    (&$CONST, params)
                }),+]
            }

            /// One operation of every kind, in the declaration's order,
            /// with values seeded by `seed` (edges as often as the middle):
            /// what a test outside this crate walks to reach every
            /// operation there is.
            #[cfg(any(test, feature = "samples"))]
            pub fn examples(seed: u64) -> Vec<$Op> {
                $Op::samples(&mut $crate::params::samples::Rng::new(seed))
            }

            /// One operation of every kind, with values from `rng` in its
            /// path and query.
            #[cfg(any(test, feature = "samples"))]
            pub(crate) fn samples(rng: &mut $crate::params::samples::Rng) -> Vec<$Op> {
                vec![$({
                    $(segment! { @sample rng $seg })+
                    $($(let $query = <$codec as QueryParam>::sample(rng);)*)?
                    $Op::$Variant $(( $($arg),* ))? $({ $($field),* })?
                }),+]
            }
        }
    };
}

//! [`Param`]: how a parameter is written in a [`Description`], and
//! [`NodeName`]: a node type's name, written once.

use std::fmt::Write as _;

use crate::describe::Description;

/// A value that can be a parameter of a [`Description`]: the fields a
/// derived node marks `#[node(param)]`, and the values a hand-written node
/// passes to [`Description::param`].
///
/// A parameter's text is part of a node's identity: a checkpoint records the
/// description of its pipeline and a fingerprint of it, and a state is only
/// loaded into a pipeline that describes itself the same way. So the
/// rendering is written out explicitly, per type, and never comes from
/// `Debug`, whose output is not promised to stay the same across Rust or
/// crate versions. The renderings provided here:
///
/// | type | rendering |
/// | --- | --- |
/// | integers | decimal: `42`, `-7` |
/// | `bool` | `true`, `false` |
/// | `str`, `String`, `char` | the text itself, unquoted |
/// | `f64`, `f32` | the shortest decimal that reads back as the same value, without exponent (`0.5`, `2`, `0.0000001`); `NaN`, `inf`, `-inf` |
/// | `Option<T>` | `None`, `Some(<T's rendering>)` |
/// | [`Description`] | its one-line label, `Name(param=value, ...)` |
/// | `&T`, `Box<T>` | `T`'s rendering |
///
/// Implement it for your own parameter types with a rendering you keep
/// stable:
///
/// ```
/// use nodes_core::{Description, Param};
///
/// #[derive(Debug, Clone, Copy)]
/// enum Resize { Crop, Pad }
///
/// impl Param for Resize {
///     fn render(&self, out: &mut String) {
///         out.push_str(match self {
///             Resize::Crop => "crop",
///             Resize::Pad => "pad",
///         });
///     }
/// }
///
/// let d = Description::new("Images").param("resize", Resize::Pad).param("size", 224);
/// assert_eq!(d.to_string(), "Images(resize=pad, size=224)");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a node parameter: it does not implement `Param`",
    label = "a node parameter needs a stable text rendering (`Param`)",
    note = "implement `Param` for it (`fn render(&self, out: &mut String)`), with a text you keep stable: it is part of every checkpoint's fingerprint",
    note = "configuration that does not decide the node's output can be `#[node(config)]` instead, which is not shown"
)]
pub trait Param {
    /// Appends this value's rendering to `out`.
    fn render(&self, out: &mut String);

    /// This value's rendering as a new string.
    fn to_param_string(&self) -> String {
        let mut out = String::new();
        self.render(&mut out);
        out
    }
}

/// Types whose `Display` is their rendering. For floats it writes the
/// shortest decimal that reads back as the same value, never an exponent,
/// and `NaN`, `inf`, `-inf`; a nested description (a sampler inside a
/// wrapper) is its one-line label.
macro_rules! displayed {
    ($($t:ty)*) => {$(
        impl Param for $t {
            fn render(&self, out: &mut String) {
                let _ = write!(out, "{self}");
            }
        }
    )*};
}

displayed!(u8 u16 u32 u64 u128 usize i8 i16 i32 i64 i128 isize f32 f64 bool char str String);
displayed!(Description);

impl<T: Param> Param for Option<T> {
    fn render(&self, out: &mut String) {
        match self {
            None => out.push_str("None"),
            Some(value) => {
                out.push_str("Some(");
                value.render(out);
                out.push(')');
            }
        }
    }
}

impl<T: Param + ?Sized> Param for &T {
    fn render(&self, out: &mut String) {
        (**self).render(out);
    }
}

impl<T: Param + ?Sized> Param for Box<T> {
    fn render(&self, out: &mut String) {
        (**self).render(out);
    }
}

/// A node type's name, as its [`Description`] and its statistics row show
/// it: written once, by `#[derive(Node)]` (the struct's name) or by hand.
///
/// Use it for the statistics label, so the two cannot drift apart:
///
/// ```
/// use nodes_core::{Cx, Node, NodeId, NodeName, Result};
/// # struct Twice<S> { source: S }
/// impl<S> NodeName for Twice<S> {
///     const NAME: &'static str = "Twice";
/// }
/// # impl<S: Node<Item = u32>> Twice<S> {
/// fn next(&mut self, cx: &mut Cx) -> Result<Option<u32>> {
///     cx.observe(NodeId::of(self), Self::NAME, |cx| {
///         Ok(self.source.next(cx)?.map(|x| x * 2))
///     })
/// }
/// # }
/// ```
pub trait NodeName {
    /// The name, without generic arguments.
    const NAME: &'static str;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(p: impl Param) -> String {
        p.to_param_string()
    }

    #[test]
    fn renderings_are_pinned() {
        assert_eq!(render(42u64), "42");
        assert_eq!(render(-7i32), "-7");
        assert_eq!(render(usize::MAX), usize::MAX.to_string());
        assert_eq!(render(true), "true");
        assert_eq!(render("a \"b\"\n"), "a \"b\"\n");
        assert_eq!(render(String::from("x")), "x");
        assert_eq!(render('é'), "é");
        assert_eq!(render(Some(3u8)), "Some(3)");
        assert_eq!(render(None::<u8>), "None");
        assert_eq!(render(Some(Some("x"))), "Some(Some(x))");
        assert_eq!(render(Box::new(5u16)), "5");
    }

    #[test]
    fn floats_are_the_shortest_decimal_without_exponent() {
        assert_eq!(render(0.5f64), "0.5");
        assert_eq!(render(2.0f64), "2");
        assert_eq!(render(0.1f64 + 0.2), "0.30000000000000004");
        assert_eq!(render(1e-7f64), "0.0000001");
        assert_eq!(render(1e21f64), "1000000000000000000000");
        assert_eq!(render(-0.0f64), "-0");
        assert_eq!(render(f64::NAN), "NaN");
        assert_eq!(render(f64::INFINITY), "inf");
        assert_eq!(render(f64::NEG_INFINITY), "-inf");
        assert_eq!(render(0.3f32), "0.3");
        assert_eq!(render(f32::NEG_INFINITY), "-inf");
    }

    #[test]
    fn a_description_renders_as_its_label() {
        let d = Description::new("RandomSampler")
            .param("len", 8)
            .param("seed", 1)
            .child("x", Description::new("Hidden"));
        assert_eq!(render(&d), "RandomSampler(len=8, seed=1)");
    }
}

//! Parsing and checking the attribute and the function signature.

use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned;
use syn::{FnArg, GenericParam, Ident, ItemFn, Pat, ReturnType, Type};

/// What the attribute asked for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// A `__global__` kernel with a launcher.
    Kernel,
    /// A `__device__` helper that kernels call.
    Device,
}

/// The attribute's options.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Attr {
    /// Kernel or device function.
    pub kind: Kind,
    /// `max_threads = N`: the most threads a block of the kernel has
    /// (`__launch_bounds__(N)`, so that its registers fit such a block).
    pub max_threads: Option<u32>,
}

/// Parses `#[symm_kernel]`, `#[symm_kernel(device)]` or
/// `#[symm_kernel(max_threads = N)]`.
pub fn attr(attr: TokenStream) -> syn::Result<Attr> {
    let mut out = Attr {
        kind: Kind::Kernel,
        max_threads: None,
    };
    if attr.is_empty() {
        return Ok(out);
    }
    let unknown = |span: Span, what: &str| {
        syn::Error::new(
            span,
            format!(
                "unknown option `{what}`; the options are `device` and `max_threads = N` \
                 (a kernel's most threads a block)"
            ),
        )
    };
    let metas = syn::parse::Parser::parse2(
        syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
        attr.clone(),
    )
    .map_err(|_| {
        syn::Error::new(
            attr.span(),
            "expected `#[symm_kernel]`, `#[symm_kernel(device)]` or `#[symm_kernel(max_threads = N)]`",
        )
    })?;
    // Where each option was given: a second one is an error, and the
    // device-and-max_threads error points at `max_threads`.
    let (mut device_at, mut max_at): (Option<Span>, Option<Span>) = (None, None);
    let twice = |span: Span, what: &str| syn::Error::new(span, format!("`{what}` is given twice"));
    for m in &metas {
        match m {
            syn::Meta::Path(p) if p.is_ident("device") => {
                if device_at.is_some() {
                    return Err(twice(p.span(), "device"));
                }
                device_at = Some(p.span());
                out.kind = Kind::Device;
            }
            syn::Meta::NameValue(nv) if nv.path.is_ident("max_threads") => {
                if max_at.is_some() {
                    return Err(twice(nv.path.span(), "max_threads"));
                }
                max_at = Some(nv.path.span());
                let n = match &nv.value {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Int(i),
                        ..
                    }) => i.base10_parse::<u32>().ok(),
                    _ => None,
                };
                match n {
                    Some(n) if (1..=1024).contains(&n) && n % 32 == 0 => out.max_threads = Some(n),
                    _ => return Err(syn::Error::new(
                        nv.value.span(),
                        "`max_threads` takes an integer literal: a multiple of 32 from 32 to 1024",
                    )),
                }
            }
            syn::Meta::Path(syn::Path { .. }) | syn::Meta::List(syn::MetaList { .. })
                if m.path().is_ident("max_threads") =>
            {
                return Err(syn::Error::new(
                    m.path().span(),
                    "`max_threads` takes a value: `#[symm_kernel(max_threads = 1024)]`",
                ))
            }
            syn::Meta::NameValue(syn::MetaNameValue { path, .. })
            | syn::Meta::List(syn::MetaList { path, .. })
                if path.is_ident("device") =>
            {
                return Err(syn::Error::new(
                    path.span(),
                    "`device` takes no value: `#[symm_kernel(device)]`",
                ))
            }
            other => {
                let what = other
                    .path()
                    .get_ident()
                    .map_or_else(|| "?".to_string(), |i| i.to_string());
                return Err(unknown(other.span(), &what));
            }
        }
    }
    if let (Some(_), Some(at)) = (device_at, max_at) {
        return Err(syn::Error::new(
            at,
            "`max_threads` is a kernel's option: a device function runs in its caller's blocks",
        ));
    }
    Ok(out)
}

/// A scalar type of the DSL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// A primitive or half type: its Rust name.
    Prim(&'static str),
    /// A generic type parameter.
    Generic(Ident),
}

/// A parameter or value type of the DSL.
#[derive(Clone, Debug)]
pub enum DslType {
    Scalar(Scalar),
    /// `&[T]`
    Slice(Scalar),
    /// `&mut [T]`
    SliceMut(Scalar),
    /// `SymmBuf<T>`
    SymmBuf(Scalar),
    /// `Remote<T>` (helpers only)
    Remote(Scalar),
    /// `Shared<T, N>` (helpers only)
    Shared(Scalar, TokenStream),
    /// `[T; N]`
    Array(Box<DslType>, syn::Expr),
    /// `()`
    Unit,
}

/// One parameter.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: Ident,
    pub ty: DslType,
    pub rust_ty: Type,
    #[allow(dead_code)]
    pub mutable: bool,
}

/// A generic parameter, as C++ sees it.
#[derive(Clone, Debug)]
pub enum Generic {
    Type(Ident),
    /// A const generic with its Rust type name.
    Const(Ident, &'static str),
}

/// A checked signature.
#[derive(Clone, Debug)]
pub struct Sig {
    pub kind: Kind,
    pub name: Ident,
    pub generics: Vec<Generic>,
    pub params: Vec<Param>,
    pub ret: DslType,
}

pub const PRIMS: &[&str] = &[
    "f32", "f64", "u8", "u16", "u32", "u64", "usize", "i32", "i64", "isize", "bool", "bf16", "f16",
    "f8e4m3", "f8e5m2",
];

fn err(span: Span, msg: impl std::fmt::Display) -> syn::Error {
    syn::Error::new(span, msg)
}

const TYPE_HELP: &str =
    "kernel values are f32, f64, u8, u16, u32, u64, usize, i32, i64, bool, bf16, f16, f8e4m3, \
                         f8e5m2, a generic type parameter, or arrays [T; N] of those";

/// Parses a scalar type: a primitive or one of `generics`.
pub fn scalar(ty: &Type, generics: &[Generic]) -> syn::Result<Scalar> {
    if let Type::Path(p) = ty {
        if p.qself.is_none() && p.path.segments.len() <= 3 {
            let last = p
                .path
                .segments
                .last()
                .ok_or_else(|| err(ty.span(), "empty type"))?;
            if last.arguments.is_empty() {
                let name = last.ident.to_string();
                if let Some(prim) = PRIMS.iter().find(|&&x| x == name) {
                    return Ok(Scalar::Prim(prim));
                }
                if p.path.segments.len() == 1
                    && generics
                        .iter()
                        .any(|g| matches!(g, Generic::Type(id) if *id == last.ident))
                {
                    return Ok(Scalar::Generic(last.ident.clone()));
                }
            }
        }
    }
    Err(err(
        ty.span(),
        format!(
            "unsupported type `{}` in a kernel; {TYPE_HELP}",
            type_str(ty)
        ),
    ))
}

/// Parses any DSL type (parameters, `let` annotations, returns).
pub fn dsl_type(ty: &Type, generics: &[Generic], kind: Kind) -> syn::Result<DslType> {
    match ty {
        Type::Tuple(t) if t.elems.is_empty() => Ok(DslType::Unit),
        Type::Paren(p) => dsl_type(&p.elem, generics, kind),
        Type::Reference(r) => match &*r.elem {
            Type::Slice(s) => {
                let el = scalar(&s.elem, generics)?;
                Ok(if r.mutability.is_some() {
                    DslType::SliceMut(el)
                } else {
                    DslType::Slice(el)
                })
            }
            _ => Err(err(
                ty.span(),
                "references are only supported as slices: `&[T]` or `&mut [T]`",
            )),
        },
        Type::Array(a) => Ok(DslType::Array(
            Box::new(dsl_type(&a.elem, generics, kind)?),
            a.len.clone(),
        )),
        Type::Path(p) if p.qself.is_none() => {
            let last = p
                .path
                .segments
                .last()
                .ok_or_else(|| err(ty.span(), "empty type"))?;
            let name = last.ident.to_string();
            let args: Vec<&syn::GenericArgument> = match &last.arguments {
                syn::PathArguments::AngleBracketed(a) => a.args.iter().collect(),
                _ => vec![],
            };
            let elem = |i: usize| -> syn::Result<Scalar> {
                match args.get(i) {
                    Some(syn::GenericArgument::Type(t)) => scalar(t, generics),
                    _ => Err(err(
                        ty.span(),
                        format!("`{name}` needs its element type, as in `{name}<f32>`"),
                    )),
                }
            };
            match name.as_str() {
                "SymmBuf" => Ok(DslType::SymmBuf(elem(0)?)),
                "Remote" | "SliceMut" | "Slice" if kind == Kind::Device => Ok(match name.as_str() {
                    "Remote" => DslType::Remote(elem(0)?),
                    "Slice" => DslType::Slice(elem(0)?),
                    _ => DslType::SliceMut(elem(0)?),
                }),
                "Shared" if kind == Kind::Device => {
                    let n = match args.get(1) {
                        Some(syn::GenericArgument::Const(c)) => quote::quote!(#c),
                        Some(syn::GenericArgument::Type(t)) => quote::quote!(#t),
                        _ => return Err(err(ty.span(), "`Shared` needs a length, as in `Shared<f32, 256>`")),
                    };
                    Ok(DslType::Shared(elem(0)?, n))
                }
                "Remote" | "Shared" | "Slice" | "SliceMut" => Err(err(
                    ty.span(),
                    format!("`{name}` is not a kernel parameter type; kernels take `&[T]`, `&mut [T]`, `SymmBuf<T>` or scalars"),
                )),
                _ => Ok(DslType::Scalar(scalar(ty, generics)?)),
            }
        }
        _ => Err(err(
            ty.span(),
            format!(
                "unsupported type `{}` in a kernel; {TYPE_HELP}",
                type_str(ty)
            ),
        )),
    }
}

/// Checks the signature of `f`. `dsl_name` says which names are the DSL's
/// own, which a device function may not take (`translate` knows them;
/// parsing comes before it).
pub fn sig(f: &ItemFn, kind: Kind, dsl_name: fn(&str) -> bool) -> syn::Result<Sig> {
    let s = &f.sig;
    let mut errors: Vec<syn::Error> = Vec::new();
    if let Some(a) = &s.asyncness {
        errors.push(err(
            a.span(),
            "kernels cannot be `async`; write a plain `fn` (launches are already asynchronous)",
        ));
    }
    if let Some(u) = &s.unsafety {
        errors.push(err(
            u.span(),
            "kernels cannot be `unsafe fn`; the DSL has no unsafe operations",
        ));
    }
    if let Some(c) = &s.constness {
        errors.push(err(c.span(), "kernels cannot be `const fn`"));
    }
    if let Some(v) = &s.variadic {
        errors.push(err(v.span(), "kernels cannot be variadic"));
    }
    if let Some(abi) = &s.abi {
        errors.push(err(
            abi.span(),
            "kernels cannot declare an ABI; the macro chooses it",
        ));
    }
    if kind == Kind::Device {
        let name = s.ident.to_string();
        let name = name.trim_start_matches("r#");
        if dsl_name(name) {
            errors.push(err(
                s.ident.span(),
                format!("a device function cannot be named `{name}`: kernels resolve `{name}(..)` as the DSL's own (`symm::dsl::{name}`, typed and translated by the macro), so yours would run on the emulator and the DSL's on the GPU; rename it"),
            ));
        }
    }
    let mut generics = Vec::new();
    for g in &s.generics.params {
        match g {
            GenericParam::Type(t) => generics.push(Generic::Type(t.ident.clone())),
            GenericParam::Const(c) => match scalar(&c.ty, &[]) {
                Ok(Scalar::Prim(p)) if ["usize", "u32", "u64", "i32", "bool"].contains(&p) => {
                    generics.push(Generic::Const(c.ident.clone(), p))
                }
                _ => errors.push(err(
                    c.ty.span(),
                    "const generics of kernels must be `usize`, `u32`, `u64`, `i32` or `bool`",
                )),
            },
            GenericParam::Lifetime(l) => {
                errors.push(err(l.span(), "kernels cannot have lifetime parameters"))
            }
        }
    }
    let mut params = Vec::new();
    for a in &s.inputs {
        match a {
            FnArg::Receiver(r) => errors.push(err(
                r.span(),
                "kernels cannot take `self`; write a free function",
            )),
            FnArg::Typed(pt) => {
                let (name, mutable) = match &*pt.pat {
                    Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                        (pi.ident.clone(), pi.mutability.is_some())
                    }
                    other => {
                        errors.push(err(
                            other.span(),
                            "kernel parameters must be plain names, not patterns",
                        ));
                        continue;
                    }
                };
                if name.to_string().starts_with("__") {
                    errors.push(err(
                        name.span(),
                        "names starting with `__` are reserved for generated code",
                    ));
                }
                match dsl_type(&pt.ty, &generics, kind) {
                    Ok(DslType::Array(..)) if kind == Kind::Kernel => errors.push(err(
                        pt.ty.span(),
                        "kernels cannot take arrays by value; pass a slice `&[T]` instead",
                    )),
                    Ok(DslType::Unit) => {
                        errors.push(err(pt.ty.span(), "a parameter of type `()` is useless"))
                    }
                    Ok(ty) => params.push(Param {
                        name,
                        ty,
                        rust_ty: (*pt.ty).clone(),
                        mutable,
                    }),
                    Err(e) => errors.push(e),
                }
            }
        }
    }
    let ret = match &s.output {
        ReturnType::Default => DslType::Unit,
        ReturnType::Type(_, t) => {
            match (kind, dsl_type(t, &generics, kind)) {
                (Kind::Kernel, Ok(DslType::Unit)) => DslType::Unit,
                (Kind::Kernel, _) => {
                    errors.push(err(
                        t.span(),
                        "kernels return nothing; write results into a `&mut [T]` or `SymmBuf<T>`",
                    ));
                    DslType::Unit
                }
                (
                    Kind::Device,
                    Ok(
                        DslType::Slice(_)
                        | DslType::SliceMut(_)
                        | DslType::SymmBuf(_)
                        | DslType::Shared(..),
                    ),
                ) => {
                    errors.push(err(t.span(), "device functions return values, `Remote<T>` or arrays, not slices or buffers"));
                    DslType::Unit
                }
                (Kind::Device, Ok(t)) => t,
                (Kind::Device, Err(e)) => {
                    errors.push(e);
                    DslType::Unit
                }
            }
        }
    };
    if let Some(wc) = &s.generics.where_clause {
        // Bounds are checked by rustc on the CPU body; nothing reaches C++.
        let _ = wc;
    }
    match errors.into_iter().reduce(|mut a, b| {
        a.combine(b);
        a
    }) {
        Some(e) => Err(e),
        None => Ok(Sig {
            kind,
            name: s.ident.clone(),
            generics,
            params,
            ret,
        }),
    }
}

/// A type as the user wrote it, without the token spacing of `to_string`.
fn type_str(ty: &Type) -> String {
    quote::quote!(#ty)
        .to_string()
        .replace(" < ", "<")
        .replace(" >", ">")
        .replace("< ", "<")
        .replace(" ,", ",")
        .replace("& ", "&")
}

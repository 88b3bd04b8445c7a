//! Code generation around the translated CUDA C: the `extern "C"` entry,
//! the CPU body and the typed launcher.

mod cpu;

use proc_macro2::TokenStream;
use quote::quote;
use syn::{FnArg, GenericParam, ItemFn, Type};

use crate::parse::{self, DslType, Generic, Kind, Scalar, Sig};
use crate::translate::prim::CPrim;
use crate::translate::{self, generic_name};

/// Expands `#[symm_kernel(attr)] item`.
pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let (kind, max_threads) = match parse::attr(attr) {
        Ok(a) => (a.kind, a.max_threads),
        Err(e) => return with_item(e, item),
    };
    let f: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(e) => {
            return with_item(
                syn::Error::new(e.span(), "#[symm_kernel] goes on a function"),
                item,
            )
        }
    };
    if let Some(e) = translate::check_depth(&f) {
        return with_item(e, item);
    }
    let sig = match parse::sig(&f, kind, translate::grammar_name) {
        Ok(s) => s,
        Err(e) => return with_item(e, item),
    };
    let lowered = translate::lower(&sig, &f);
    let mut cpu_block = (*f.block).clone();
    let mut errors = lowered.errors;
    errors.extend(cpu::rewrite(&mut cpu_block, &f.sig.ident));
    if let Some(e) = errors.into_iter().reduce(|mut a, b| {
        a.combine(b);
        a
    }) {
        // Stand in for the item without its body: compilation fails anyway,
        // so this never runs, and the user sees exactly the macro's errors
        // (rustc checks the body once they are fixed).
        let ce = e.to_compile_error();
        let (vis, name) = (&f.vis, &f.sig.ident);
        return match kind {
            Kind::Kernel => quote! { #ce #[allow(dead_code)] #vis mod #name {} },
            Kind::Device => {
                let sig = &f.sig;
                quote! { #ce #[allow(dead_code, unused_variables)] #vis #sig { ::core::unreachable!() } }
            }
        };
    }
    let deps = dep_paths(&lowered.deps);
    let cuda_fn = translate::emit(&lowered.function);
    let asserts = assert_sites(&lowered.asserts);
    let out = Out {
        cpu_block,
        cuda_fn: &cuda_fn,
        deps: &deps,
        asserts: &asserts,
    };
    match kind {
        Kind::Device => device(&f, &sig, out),
        Kind::Kernel => kernel(&f, &sig, out, max_threads),
    }
}

/// What translation leaves for the expansion of either kind.
struct Out<'a> {
    /// The CPU body.
    cpu_block: syn::Block,
    /// The translated CUDA C.
    cuda_fn: &'a str,
    /// Paths of the called device functions' `DEVICE` statics.
    deps: &'a [TokenStream],
    /// The `&[AssertSite]` of the function's assertions.
    asserts: &'a TokenStream,
}

/// The function's `kernel_assert!`s as the host keeps them, in the order
/// the CUDA C numbers them: `line!()` and `column!()` at each macro's span,
/// as its CPU body reports them (see `cpu::rewrite`).
fn assert_sites(asserts: &[translate::AssertInfo]) -> TokenStream {
    let private = crate::private::path();
    let sites = asserts.iter().map(|a| {
        let (line, column) = (
            quote::quote_spanned!(a.span=> ::core::line!()),
            quote::quote_spanned!(a.span=> ::core::column!()),
        );
        let message = &a.message;
        quote! {
            #private::AssertSite { line: #line, column: #column, message: #message }
        }
    });
    quote!(&[#(#sites),*])
}

/// The compile error, followed by the untouched item, so that the rest of
/// the crate (and the IDE) still sees the function.
fn with_item(e: syn::Error, item: TokenStream) -> TokenStream {
    let ce = e.to_compile_error();
    quote!(#ce #[allow(dead_code)] #item)
}

/// Paths to the `DEVICE` statics of called device functions, as seen from a
/// module nested one level below the item.
fn dep_paths(deps: &[syn::Path]) -> Vec<TokenStream> {
    let mut out: Vec<TokenStream> = Vec::new();
    for p in deps {
        let segs: Vec<&syn::Ident> = p.segments.iter().map(|s| &s.ident).collect();
        let first = segs.first().map(|s| s.to_string()).unwrap_or_default();
        let rest = &segs[1..];
        let path = match first.as_str() {
            "self" => quote!(super #(:: #rest)* :: DEVICE),
            "super" => quote!(super::super #(:: #rest)* :: DEVICE),
            _ => {
                let lead = if p.leading_colon.is_some() {
                    quote!(::)
                } else {
                    quote!()
                };
                quote!(#lead #(#segs)::* :: DEVICE)
            }
        };
        // Kept in order, one for one: the C calls the `i`th as `d<i>`.
        out.push(path);
    }
    out
}

/// `line!()` at `name`: the line that the lines of the function's indexing
/// sites are relative to (see `translate::ir::ExprKind::Index`).
fn name_line(name: &syn::Ident) -> TokenStream {
    quote::quote_spanned!(name.span()=> ::core::line!())
}

/// Element type in the `extern "C"` wrapper, where generics are `$G_T$`
/// placeholders filled at instantiation.
fn placeholder(s: &Scalar) -> String {
    match s {
        Scalar::Prim(p) => CPrim::from_rust(p).map_or("void", CPrim::c_name).into(),
        Scalar::Generic(id) => format!("${}$", generic_name(id)),
    }
}

/// The `extern "C"` entry with `$ENTRY$` and generic placeholders, written
/// from the kernel ABI ([`symm_abi`]): the hidden parameters, then each
/// argument's fields; returns it and its number of parameter slots.
fn wrapper(sig: &Sig, max_threads: Option<u32>) -> (String, usize) {
    let mut params: Vec<String> = symm_abi::HIDDEN
        .iter()
        .map(|f| format!("{} __{}", f.c_type, f.name))
        .collect();
    let ctx: Vec<String> = symm_abi::HIDDEN
        .iter()
        .map(|f| format!("__{}", f.name))
        .collect();
    let mut args = vec!["__ctx".to_string()];
    // The entry's parameters are `p<j>_<field>` for the `j`th argument, never
    // the user's names: a `p` spelling cannot equal a user name's (`v_..`),
    // so an argument `x_len` cannot meet the length of a slice `x`.
    let handle = |params: &mut Vec<String>, n: &str, ty: String, fields: &[symm_abi::Field]| {
        for f in fields {
            params.push(format!("{} {n}_{}", f.c_type, f.name));
        }
        let init: Vec<String> = fields.iter().map(|f| format!("{n}_{}", f.name)).collect();
        format!("{ty}{{{}}}", init.join(", "))
    };
    let mut slots = symm_abi::HIDDEN.len();
    for (j, p) in sig.params.iter().enumerate() {
        let n = format!("p{j}");
        match &p.ty {
            DslType::Slice(e) | DslType::SliceMut(e) => {
                let e = placeholder(e);
                // The slice's pointer arrives untyped.
                let h = handle(
                    &mut params,
                    &n,
                    format!("symm_slice<{e}>"),
                    &symm_abi::SLICE,
                );
                args.push(h.replacen(&format!("{{{n}_ptr"), &format!("{{({e}*){n}_ptr"), 1));
                slots += symm_abi::SLICE.len();
            }
            DslType::SymmBuf(e) => {
                let e = placeholder(e);
                args.push(handle(
                    &mut params,
                    &n,
                    format!("symm_buf<{e}>"),
                    &symm_abi::SYMM_BUF,
                ));
                slots += symm_abi::SYMM_BUF.len();
            }
            DslType::Scalar(s) => {
                params.push(format!("{} {n}", placeholder(s)));
                args.push(n);
                slots += 1;
            }
            _ => {}
        }
    }
    let targs: Vec<String> = sig
        .generics
        .iter()
        .map(|g| format!("${}$", generic_name(g.ident())))
        .collect();
    let targs = if targs.is_empty() {
        String::new()
    } else {
        format!("<{}>", targs.join(", "))
    };
    // `max_threads`: ptxas keeps the kernel's registers within what a
    // block of that many threads may hold.
    let bounds = max_threads.map_or(String::new(), |n| format!("__launch_bounds__({n}) "));
    let src = format!(
        "extern \"C\" __global__ void {bounds}$ENTRY$({}) {{\n    symm_kctx __ctx = {{{}}};\n    {}{targs}({});\n}}\n",
        params.join(", "),
        ctx.join(", "),
        translate::kernel_name(&sig.name),
        args.join(", ")
    );
    (src, slots)
}

impl Generic {
    fn ident(&self) -> &syn::Ident {
        match self {
            Generic::Type(i) | Generic::Const(i, _) => i,
        }
    }
}

/// The generics of the generated functions: the user's, plus `Scalar` on
/// every type parameter (the launcher needs its CUDA name).
fn generics_with_scalar(f: &ItemFn) -> syn::Generics {
    let mut g = f.sig.generics.clone();
    let tys: Vec<syn::Ident> = g
        .params
        .iter()
        .filter_map(|p| match p {
            GenericParam::Type(t) => Some(t.ident.clone()),
            _ => None,
        })
        .collect();
    let wc = g.make_where_clause();
    for t in tys {
        wc.predicates
            .push(syn::parse_quote!(#t: ::symm::dsl::Scalar));
    }
    g
}

/// Parameters of the CPU body: slices become DSL handles.
fn cpu_params(f: &ItemFn, sig: &Sig) -> Vec<TokenStream> {
    f.sig
        .inputs
        .iter()
        .zip(&sig.params)
        .map(|(a, p)| {
            let FnArg::Typed(pt) = a else { return quote!() };
            let pat = &pt.pat;
            match (&p.ty, &*pt.ty) {
                (DslType::Slice(_), Type::Reference(r))
                | (DslType::SliceMut(_), Type::Reference(r)) => {
                    let Type::Slice(s) = &*r.elem else {
                        return quote!(#pat: ());
                    };
                    let e = &s.elem;
                    if r.mutability.is_some() {
                        quote!(#pat: ::symm::dsl::SliceMut<#e>)
                    } else {
                        quote!(#pat: ::symm::dsl::Slice<#e>)
                    }
                }
                _ => {
                    let t = &pt.ty;
                    quote!(#pat: #t)
                }
            }
        })
        .collect()
}

fn device(f: &ItemFn, sig: &Sig, out: Out<'_>) -> TokenStream {
    let Out {
        mut cpu_block,
        cuda_fn,
        deps,
        asserts,
    } = out;
    let private = crate::private::path();
    let (vis, name) = (&f.vis, &f.sig.ident);
    let attrs = &f.attrs;
    let generics = generics_with_scalar(f);
    let wc = &generics.where_clause;
    let params = cpu_params(f, sig);
    let ret = &f.sig.output;
    let name_str = name.to_string();
    let line = name_line(name);
    let prelude = cpu::prelude();
    cpu_block.stmts.insert(0, syn::parse_quote!(#prelude));
    // Spanned at the name, so a cycle of calls underlines this function.
    let no_recursion = quote::quote_spanned! {name.span()=>
        const _: () = DEVICE.assert_not_recursive();
    };
    quote! {
        #(#attrs)*
        #[allow(clippy::all, unused_mut, unused_variables, unused_parens, unused_braces)]
        #vis fn #name #generics (#(#params),*) #ret #wc #cpu_block

        #[doc(hidden)]
        #[allow(non_snake_case, unused_imports, dead_code)]
        #vis mod #name {
            use super::*;
            /// This function's CUDA C, as translated by `#[symm_kernel]`.
            pub const SOURCE: &str = #cuda_fn;
            /// This function's CUDA C, and the device functions it calls.
            // SAFETY: the macro translated `source` from this function's
            // body, which the DSL checked, and listed every device function
            // it calls (recursion is refused just below).
            pub static DEVICE: #private::DeviceFn = unsafe {
                #private::DeviceFn::new(
                    #name_str,
                    SOURCE,
                    &[#(&#deps),*],
                    ::core::file!(),
                    #line,
                    #asserts,
                )
            };
            #no_recursion
        }
    }
}

fn kernel(f: &ItemFn, sig: &Sig, out: Out<'_>, max_threads: Option<u32>) -> TokenStream {
    let Out {
        mut cpu_block,
        cuda_fn,
        deps,
        asserts,
    } = out;
    let private = crate::private::path();
    let (vis, name) = (&f.vis, &f.sig.ident);
    let docs: Vec<&syn::Attribute> = f
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect();
    let name_str = name.to_string();
    let generics = generics_with_scalar(f);
    let wc = &generics.where_clause;
    let (wrapper_src, slots) = wrapper(sig, max_threads);
    let def_bounds = max_threads.map_or(quote!(), |n| quote!(.with_max_threads(#n)));
    let hidden = quote!(#private::HIDDEN_SLOTS);

    // Instantiation: fill the generic placeholders, keyed by their values.
    let mut fills = Vec::new();
    let mut keys = Vec::new();
    for g in &sig.generics {
        let ph = format!("${}$", generic_name(g.ident()));
        let id = g.ident();
        match g {
            Generic::Type(_) => {
                fills.push(quote!(__w = __w.replace(#ph, <#id as ::symm::dsl::Scalar>::CUDA);));
                keys.push(quote!(<#id as ::symm::dsl::Scalar>::CUDA.to_string()));
            }
            Generic::Const(..) => {
                fills.push(quote!(__w = __w.replace(#ph, &::std::format!("{}", #id));));
                keys.push(quote!(::std::format!("{}", #id)));
            }
        }
    }

    // Launcher parameters, their ABI values, and slot packing. `__params`
    // packs the ABI values (one per argument) into the entry's slots; the
    // launcher checks and binds its arguments, fills their ABI values and
    // builds the emulator's handles from the same values.
    let mut largs = Vec::new();
    let mut binds = Vec::new();
    let mut pargs = Vec::new();
    let mut pvals = Vec::new();
    let mut packs = Vec::new();
    let mut cpu_args = Vec::new();
    let mut fwd = Vec::new();
    for (a, p) in f.sig.inputs.iter().zip(&sig.params) {
        let FnArg::Typed(pt) = a else { continue };
        let n = &p.name;
        let n_str = n.to_string();
        let v = quote::format_ident!("__v_{}", n);
        let a = quote::format_ident!("__a_{}", n);
        // An argument that reaches `__params` as an ABI value (`ty`), named
        // `__v_<name>` in the launcher.
        let mut abi_value = |ty: TokenStream| {
            pargs.push(quote!(#n: #ty));
            packs.push(quote! {
                __p[__k..__k + #ty::SLOTS].copy_from_slice(&#n.slots());
                __k += #ty::SLOTS;
            });
            pvals.push(quote!(#v));
        };
        match (&p.ty, &*pt.ty) {
            (DslType::Slice(_) | DslType::SliceMut(_), Type::Reference(r)) => {
                let Type::Slice(s) = &*r.elem else { continue };
                let e = &s.elem;
                if r.mutability.is_some() {
                    largs.push(quote!(#n: &mut (impl ::symm::DeviceSlice<#e> + ?Sized)));
                } else {
                    largs.push(quote!(#n: &(impl ::symm::DeviceSlice<#e> + ?Sized)));
                }
                fwd.push(quote!(#n));
                let handle = if r.mutability.is_some() {
                    quote!(SliceMut)
                } else {
                    quote!(Slice)
                };
                let b = quote::format_ident!("__b_{}", n);
                let bind = if r.mutability.is_some() {
                    quote!(let #b = #private::slice_arg_mut::<#e, _>(comm, #n_str, &mut *#n)?;)
                } else {
                    quote!(let #b = #private::slice_arg::<#e, _>(comm, #n_str, &*#n)?;)
                };
                binds.push(quote! {
                    // Lives until the launch is enqueued: for cudarc memory,
                    // its drop records the kernel's use (cudarc's stream order).
                    #bind
                    let #v = #private::SliceArg { ptr: #b.device_ptr(), len: #b.len() as u64 };
                    // SAFETY: `slice_arg` took the address and length from a
                    // live slice of this rank, which the launch borrows until
                    // the kernel is enqueued (the emulator runs it to
                    // completion); the memory's frees wait for the kernel
                    // after that.
                    let #a = unsafe { ::symm::dsl::#handle::<#e>::__new(#v.ptr, #v.len as usize) };
                });
                abi_value(quote!(#private::SliceArg));
                cpu_args.push(quote!(#a));
            }
            (DslType::SymmBuf(_), Type::Path(tp)) => {
                let e = match tp.path.segments.last().map(|s| &s.arguments) {
                    Some(syn::PathArguments::AngleBracketed(ab)) => ab.args.first().cloned(),
                    _ => None,
                };
                largs.push(quote!(#n: &::symm::SymmetricMemory));
                fwd.push(quote!(#n));
                binds.push(quote! {
                    let #v = #private::symm_arg::<#e>(comm, #n_str, #n)?;
                    // SAFETY: the value is `symm_arg`'s, of memory this
                    // launch borrows while the handle lives.
                    let #a = unsafe { #private::symm_handle::<#e>(#v) };
                });
                abi_value(quote!(#private::SymmBufArg));
                cpu_args.push(quote!(#a));
            }
            (DslType::Scalar(s), t) => {
                largs.push(quote!(#n: #t));
                fwd.push(quote!(#n));
                let slot = match s {
                    Scalar::Prim("bool") => quote!(#private::slot_bool(#n)),
                    Scalar::Prim("usize") | Scalar::Prim("u16") => {
                        quote!(#private::slot_u64(#n as u64))
                    }
                    Scalar::Prim("isize") => quote!(#private::slot_u64(#n as i64 as u64)),
                    _ => quote!(#private::slot(#n)),
                };
                pargs.push(quote!(#n: #t));
                packs.push(quote! { __p[__k] = #slot; __k += 1; });
                pvals.push(quote!(#n));
                cpu_args.push(quote!(#n));
            }
            _ => {}
        }
    }
    // A kernel that can reach peers can wait on them.
    let peers = sig
        .params
        .iter()
        .any(|p| matches!(p.ty, DslType::SymmBuf(_)));
    let params = cpu_params(f, sig);
    let reify: Vec<TokenStream> = params.iter().map(|_| quote!(_)).collect();
    let prelude = cpu::prelude();
    cpu_block.stmts.insert(0, syn::parse_quote!(#prelude));
    let turbofish: Vec<TokenStream> = sig
        .generics
        .iter()
        .map(|g| {
            let id = g.ident();
            quote!(#id)
        })
        .collect();
    let tf = if turbofish.is_empty() {
        quote!()
    } else {
        quote!(::<#(#turbofish),*>)
    };
    let cuda_doc = format!(
        "The kernel's CUDA C body, as translated by `#[symm_kernel]`:\n\n```cpp\n{cuda_fn}```"
    );
    let line = name_line(name);
    quote! {
        #(#docs)*
        #[allow(non_snake_case, unused_imports, dead_code, clippy::all)]
        #vis mod #name {
            use super::*;

            /// The kernel's name.
            pub const NAME: &str = #name_str;

            #[doc = #cuda_doc]
            pub const CUDA_BODY: &str = #cuda_fn;

            const WRAPPER: &str = #wrapper_src;

            /// The translated CUDA C body (a template when the kernel is generic).
            pub fn cuda_source() -> &'static str {
                CUDA_BODY
            }

            fn __deps() -> ::std::vec::Vec<&'static #private::DeviceFn> {
                ::std::vec![#(&#deps),*]
            }

            fn __key #generics () -> ::std::vec::Vec<::std::string::String> #wc {
                ::std::vec![#(#keys),*]
            }

            /// The complete CUDA C of these generic arguments, exporting `__entry`.
            #[doc(hidden)]
            pub fn __source #generics (__entry: &str) -> ::std::string::String #wc {
                // Instantiates the CPU body with these generic arguments
                // too, so that what the DSL's Rust side rejects at compile
                // time (a vector access that is not 16 bytes) is rustc's
                // error naming the kernel's line, also for a kernel only
                // compiled for a GPU, rather than NVRTC's on generated C.
                let _ = ::core::hint::black_box(cpu #tf as fn(#(#reify),*));
                let mut __w = WRAPPER.replace("$ENTRY$", __entry);
                #(#fills)*
                #private::kernel_source(&__deps(), CUDA_BODY, &__w)
            }

            /// The complete CUDA C that is compiled for these generic arguments.
            pub fn cuda_source_for #generics () -> ::std::string::String #wc {
                __source #tf (NAME)
            }

            /// Compiles this instantiation to a CUBIN for `arch` with NVRTC,
            /// without a GPU (the check CI runs on every kernel), as
            /// [`launch_unchecked`] runs it: indices unchecked.
            pub fn compile_for #generics (arch: ::symm::jit::Arch) -> ::symm::Result<()> #wc {
                let __key = __key #tf ();
                let __key: ::std::vec::Vec<&str> = __key.iter().map(|s| s.as_str()).collect();
                DEF.compile_check(&__key, false, &|__e| __source #tf (__e), arch)
            }

            /// [`compile_for`], as [`launch`] runs the kernel: every index
            /// bounds-checked.
            pub fn compile_checked_for #generics (arch: ::symm::jit::Arch) -> ::symm::Result<()> #wc {
                let __key = __key #tf ();
                let __key: ::std::vec::Vec<&str> = __key.iter().map(|s| s.as_str()).collect();
                DEF.compile_check(&__key, true, &|__e| __source #tf (__e), arch)
            }

            /// Parameter slots of a launch: the CUDA entry's parameter count.
            pub const PARAM_SLOTS: usize = #slots;

            /// The file that defines the kernel.
            pub const FILE: &str = ::core::file!();

            /// The line of the kernel's name in [`FILE`].
            pub const LINE: u32 = #line;

            /// The kernel's `kernel_assert!`s (not its device functions'), in
            /// the order its CUDA C numbers them: where each is and what it
            /// says, as a failure reports them.
            pub const ASSERTS: &[#private::AssertSite] = #asserts;

            /// The kernel as the runtime knows it.
            #[doc(hidden)]
            pub static DEF: #private::KernelDef = #private::KernelDef::new(NAME, #peers, FILE, LINE, ASSERTS, __deps, PARAM_SLOTS) #def_bounds;

            /// The largest grid of this kernel, with `block` threads and
            /// `shared_mem` bytes of dynamic shared memory per block, that
            /// `comm` may [`launch`] so that the kernels of ranks sharing a
            /// GPU are resident together (`None`: any grid, as when every
            /// rank has its own GPU). Compiles the kernel if it is not yet.
            pub fn co_resident_grid #generics (comm: &::symm::Comm, block: u32, shared_mem: u32) -> ::symm::Result<::std::option::Option<u32>> #wc {
                let __key = __key #tf ();
                let __key: ::std::vec::Vec<&str> = __key.iter().map(|s| s.as_str()).collect();
                DEF.co_resident_grid(comm, &__key, true, block, shared_mem, &|__e| __source #tf (__e))
            }

            /// [`co_resident_grid`] for [`launch_unchecked`], whose
            /// instantiation (without bounds checks) may fit more blocks.
            pub fn co_resident_grid_unchecked #generics (comm: &::symm::Comm, block: u32, shared_mem: u32) -> ::symm::Result<::std::option::Option<u32>> #wc {
                let __key = __key #tf ();
                let __key: ::std::vec::Vec<&str> = __key.iter().map(|s| s.as_str()).collect();
                DEF.co_resident_grid(comm, &__key, false, block, shared_mem, &|__e| __source #tf (__e))
            }

            /// Launches the kernel on `comm`'s stream. Argument types are
            /// checked by rustc; that buffers belong to `comm`'s rank, and
            /// symmetric buffers' element types, are checked here. The
            /// kernel's indexing (`x[i]`) is bounds-checked on the GPU too:
            /// the first index out of bounds is reported by the next
            /// synchronisation as [`Error::KernelFault`](::symm::Error::KernelFault)
            /// (naming the rank, block, thread, index, length and source
            /// line), and nothing out of bounds is read or written there. A
            /// failed `kernel_assert!` stops its thread and is reported as
            /// [`Error::KernelAssert`](::symm::Error::KernelAssert).
            pub fn launch #generics (comm: &::symm::Comm, cfg: ::symm::LaunchConfig, #(#largs),*) -> ::symm::Result<()> #wc {
                // SAFETY: a checked launch has no precondition.
                unsafe { __launch #tf (true, comm, cfg, #(#fwd),*) }
            }

            /// [`launch`] without bounds checks on the GPU: the kernel is
            /// compiled with plain indexing (unless the environment sets
            /// `SYMM_CHECK_ALL=1`). The CPU emulator checks every index
            /// either way, and `kernel_assert!`s hold in both.
            ///
            /// # Safety
            ///
            /// Every index the kernel computes from these arguments must be
            /// in bounds of what it indexes: an index out of bounds reads or
            /// writes memory the kernel does not own.
            pub unsafe fn launch_unchecked #generics (comm: &::symm::Comm, cfg: ::symm::LaunchConfig, #(#largs),*) -> ::symm::Result<()> #wc {
                // SAFETY: the caller's promise is `__launch`'s precondition.
                unsafe { __launch #tf (false, comm, cfg, #(#fwd),*) }
            }

            /// The launch's parameter slots, from each argument's ABI value
            /// (the hidden slots are left for the backend to fill): the one
            /// packing of this kernel's arguments.
            #[doc(hidden)]
            #[allow(unused_mut)]
            pub fn __params #generics (#(#pargs),*) -> [[u8; 8]; PARAM_SLOTS] #wc {
                let mut __p = [[0u8; 8]; PARAM_SLOTS];
                let mut __k: usize = #hidden;
                #(#packs)*
                ::core::debug_assert_eq!(__k, PARAM_SLOTS);
                __p
            }

            /// Checks and binds the arguments, packs them and launches,
            /// checked or not.
            ///
            /// # Safety
            ///
            /// Unless `__checked`, as [`launch_unchecked`].
            unsafe fn __launch #generics (__checked: bool, comm: &::symm::Comm, cfg: ::symm::LaunchConfig, #(#largs),*) -> ::symm::Result<()> #wc {
                #(#binds)*
                let mut __p = __params #tf (#(#pvals),*);
                let __key = __key #tf ();
                let __key: ::std::vec::Vec<&str> = __key.iter().map(|s| s.as_str()).collect();
                let __src = |__e: &str| __source #tf (__e);
                let __cpu = || cpu #tf (#(#cpu_args),*);
                if __checked {
                    // SAFETY: the source and slots are this kernel's, packed
                    // by the ABI from arguments checked above.
                    unsafe { DEF.launch(comm, &__key, cfg, &mut __p, &__src, &__cpu) }
                } else {
                    // SAFETY: the caller promises that every index is in bounds.
                    unsafe { DEF.launch_unchecked(comm, &__key, cfg, &mut __p, &__src, &__cpu) }
                }
            }

            /// The kernel body as Rust, for the CPU emulator.
            #[allow(unused_mut, unused_variables, unused_parens, unused_braces)]
            pub fn cpu #generics (#(#params),*) #wc #cpu_block
        }
    }
}

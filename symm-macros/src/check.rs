//! `check_kernels!`: a test that compiles listed kernel instantiations with
//! NVRTC.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Ident, Path, PathArguments, Token};

/// `[#[attr]* fn name;] path, path, ...`
struct Input {
    attrs: Vec<Attribute>,
    name: Ident,
    kernels: Punctuated<Path, Token![,]>,
}

impl Parse for Input {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let name = if input.peek(Token![fn]) {
            input.parse::<Token![fn]>()?;
            let name: Ident = input.parse()?;
            input.parse::<Token![;]>()?;
            name
        } else if let Some(a) = attrs.first() {
            return Err(syn::Error::new(
                a.span(),
                "attributes go on a named test: `#[..] fn my_test; kernel, ...`",
            ));
        } else {
            Ident::new("kernels_compile_with_nvrtc", proc_macro2::Span::call_site())
        };
        let kernels = Punctuated::parse_terminated(input)?;
        if kernels.is_empty() {
            return Err(input.error(
                "list the kernels to compile: `check_kernels!(my_kernel, generic::<f32>)`",
            ));
        }
        Ok(Input {
            attrs,
            name,
            kernels,
        })
    }
}

pub(crate) fn expand(input: TokenStream) -> TokenStream {
    let input = match syn::parse2::<Input>(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let private = crate::private::path();
    let mut checks = Vec::new();
    for path in &input.kernels {
        match check(path, &private) {
            Ok(c) => checks.push(c),
            Err(e) => return e.to_compile_error(),
        }
    }
    let Input { attrs, name, .. } = input;
    let test = name.to_string();
    quote! {
        #(#attrs)*
        #[cfg_attr(test, test)]
        #[allow(dead_code)]
        fn #name() {
            #private::check_kernels(#test, &[#(#checks),*]);
        }
    }
}

/// The `KernelCheck` of one instantiation: the kernel's module path, with
/// the generic arguments of its last segment moved onto `compile_for`.
fn check(path: &Path, private: &TokenStream) -> syn::Result<TokenStream> {
    let mut module = path.clone();
    let last = module.segments.last_mut().expect("a path has a segment");
    let args = std::mem::replace(&mut last.arguments, PathArguments::None);
    let generics = match args {
        PathArguments::None => quote!(),
        PathArguments::AngleBracketed(mut a) => {
            a.colon2_token = Some(Default::default());
            quote!(#a)
        }
        PathArguments::Parenthesized(p) => {
            return Err(syn::Error::new(
                p.span(),
                "a kernel's generic arguments go in `::<...>`",
            ))
        }
    };
    if let Some(s) = module.segments.iter().find(|s| !s.arguments.is_none()) {
        return Err(syn::Error::new(
            s.arguments.span(),
            "only the kernel (the path's last name) takes generic arguments",
        ));
    }
    let name = display(quote!(#path));
    // Spanned at the user's path, so that a name that is no kernel, or
    // generic arguments missing, are reported there.
    let span = path.span();
    Ok(quote_spanned! {span=>
        #private::KernelCheck {
            name: #name,
            unchecked: #module::compile_for #generics,
            checked: #module::compile_checked_for #generics,
        }
    })
}

/// `tokens` as written, with spaces only between words and after commas
/// (`k::<symm::bf16, 8, 2>`, `k::<{1<<20}>`).
fn display(tokens: TokenStream) -> String {
    let mut out = String::new();
    let mut word = false;
    for t in tokens {
        match t {
            TokenTree::Ident(i) => {
                if word {
                    out.push(' ');
                }
                out += &i.to_string();
                word = true;
            }
            TokenTree::Literal(l) => {
                if word {
                    out.push(' ');
                }
                out += &l.to_string();
                word = true;
            }
            TokenTree::Punct(p) => {
                out.push(p.as_char());
                if p.as_char() == ',' {
                    out.push(' ');
                }
                word = false;
            }
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Brace => ("{", "}"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::None => ("", ""),
                };
                if word {
                    out.push(' ');
                }
                out += open;
                out += display(g.stream()).trim_end();
                out += close;
                word = false;
            }
        }
    }
    out.trim_end().to_string()
}

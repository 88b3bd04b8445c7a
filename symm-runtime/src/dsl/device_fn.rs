//! Device functions as kernels' sources list them: what a
//! `#[symm_kernel(device)]` function leaves behind, and what each intrinsic
//! defines beside its Rust stub (see [`intrinsic!`](super::intrinsics)).

/// What a `#[symm_kernel(device)]` function leaves for kernels that call it.
///
/// Its CUDA C runs in every kernel that calls the function, however safely
/// that kernel is launched, so only the macro (and the DSL's intrinsics)
/// make one: the fields are private and [`DeviceFn::new`] is `unsafe`.
#[derive(Debug)]
pub struct DeviceFn {
    /// The function's name (for diagnostics and de-duplication).
    pub(crate) name: &'static str,
    /// Its CUDA C definition.
    pub(crate) source: &'static str,
    /// Device functions it calls.
    pub(crate) deps: &'static [&'static DeviceFn],
    /// The file that defines it.
    pub(crate) file: &'static str,
    /// The line of its name: the lines of its indexing sites are relative
    /// to it, so that a checked launch can report where an index was out of
    /// bounds.
    pub(crate) line: u32,
    /// Its `kernel_assert!`s, in the order its CUDA C numbers them.
    pub(crate) asserts: &'static [crate::status::AssertSite],
}

impl DeviceFn {
    /// A device function from its parts, as `#[symm_kernel(device)]`
    /// writes them.
    ///
    /// # Safety
    ///
    /// `source` is compiled into every kernel that lists this function
    /// (through `deps` of its callers) and runs there with the kernel's
    /// memory, however that kernel is launched. It must be the CUDA C
    /// definition of a function named `f_<name>` taking the kernel context
    /// first, as the macro writes them, that touches only memory reached
    /// through its arguments, within their bounds, and computes what the
    /// Rust function of the same name computes on the emulator. `deps` must
    /// be every device function its C calls, `asserts` its
    /// `kernel_assert!`s in the order its C numbers them, and the calls
    /// among device functions must not be recursive.
    #[doc(hidden)]
    pub const unsafe fn new(
        name: &'static str,
        source: &'static str,
        deps: &'static [&'static DeviceFn],
        file: &'static str,
        line: u32,
        asserts: &'static [crate::status::AssertSite],
    ) -> DeviceFn {
        DeviceFn {
            name,
            source,
            deps,
            file,
            line,
            asserts,
        }
    }

    /// The function's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// Its CUDA C definition.
    pub const fn source(&self) -> &'static str {
        self.source
    }

    /// The device functions it calls.
    pub const fn deps(&self) -> &'static [&'static DeviceFn] {
        self.deps
    }

    /// The file that defines it.
    pub const fn file(&self) -> &'static str {
        self.file
    }

    /// The line of its name in [`file`](Self::file).
    pub const fn line(&self) -> u32 {
        self.line
    }

    /// Its `kernel_assert!`s, in the order its CUDA C numbers them.
    pub const fn asserts(&self) -> &'static [crate::status::AssertSite] {
        self.asserts
    }

    /// Fails to compile (const evaluation panics) where this function
    /// reaches itself through the functions it calls: a GPU thread's stack
    /// is small and fixed, so the DSL has no recursion (a direct call of
    /// itself is the macro's error; this finds the cycles through others).
    /// Also refuses call chains deeper than [`MAX_CALL_DEPTH`].
    #[doc(hidden)]
    pub const fn assert_not_recursive(&'static self) {
        reaches(self, self.deps, 1);
    }
}

/// Deepest chain of device-function calls a kernel may have.
pub const MAX_CALL_DEPTH: u32 = 64;

/// Whether `a` and `b` are one definition (const evaluation cannot compare
/// addresses, but a definition's name, file and line are its own).
const fn same(a: &DeviceFn, b: &DeviceFn) -> bool {
    a.line == b.line && str_eq(a.name, b.name) && str_eq(a.file, b.file)
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Panics where `root` is among `deps` or what they call.
const fn reaches(root: &DeviceFn, deps: &[&DeviceFn], depth: u32) {
    if depth > MAX_CALL_DEPTH {
        panic!("device functions call each other more than 64 deep (or recursively); kernels support neither");
    }
    let mut i = 0;
    while i < deps.len() {
        if same(deps[i], root) {
            panic!("this device function calls itself through the device functions it calls; recursion is not supported in kernels (a GPU thread's stack is small and fixed): write a loop");
        }
        reaches(root, deps[i].deps, depth + 1);
        i += 1;
    }
}

/// `direct` and everything they call, callees first, once each: the order
/// of their definitions in a kernel's source. A cycle (only possible
/// through [`DeviceFn::new`]'s broken contract) is cut, not followed.
pub(crate) fn device_fns(direct: &[&'static DeviceFn]) -> Vec<&'static DeviceFn> {
    fn visit(
        f: &'static DeviceFn,
        out: &mut Vec<&'static DeviceFn>,
        open: &mut Vec<&'static DeviceFn>,
    ) {
        if out.iter().chain(open.iter()).any(|g| std::ptr::eq(*g, f)) {
            return;
        }
        open.push(f);
        for d in f.deps {
            visit(d, out, open);
        }
        open.pop();
        out.push(f);
    }
    let mut out = Vec::new();
    let mut open = Vec::new();
    for f in direct {
        visit(f, &mut out, &mut open);
    }
    out
}

/// The C name the macro gives a definition named `name` (`f_<name>`, the
/// UTF-8 bytes in hex for a non-ASCII name), as `symm-macros` spells it.
fn definition_name(name: &str) -> String {
    let name = name.trim_start_matches("r#");
    if name.is_ascii() {
        format!("f_{name}")
    } else {
        let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
        format!("fx_{hex}")
    }
}

/// The unique C name of the `k`th function of a kernel's source: two
/// functions of one name (from two modules, or a user's beside an
/// intrinsic it shadows) never meet in C.
fn unique_name(k: usize, f: &DeviceFn) -> String {
    format!("symm_fn{k}_{}", definition_name(f.name))
}

/// `#define`s of `d<i>`, the name a function's C calls its `i`th
/// dependency by, as the unique name of that dependency in `order`.
fn dep_defines(deps: &[&'static DeviceFn], order: &[&'static DeviceFn]) -> (String, String) {
    let (mut define, mut undef) = (String::new(), String::new());
    for (i, d) in deps.iter().enumerate() {
        if let Some(k) = order.iter().position(|g| std::ptr::eq(*g, *d)) {
            define.push_str(&format!("#define d{i} {}\n", unique_name(k, d)));
            undef.push_str(&format!("#undef d{i}\n"));
        }
    }
    (define, undef)
}

/// Definitions of `direct` and everything they call, callees first, once
/// each (as `device_fns` orders them), then the `#define`s through which
/// the code after them calls `direct` (`d<i>` for the `i`th). Each
/// definition is preceded by `SYMM_SITE_FN`, its position in that order
/// counted from 1 (0 is the kernel), which its indexing sites record when
/// they fail a bounds check, and its assertions when they fail, and by the
/// `#define`s of its own name and its callees' (`d<i>`), which give every
/// function a name of its own in the kernel's C.
pub fn device_sources(direct: &[&'static DeviceFn]) -> String {
    let order = device_fns(direct);
    let mut out = String::new();
    for (k, f) in order.iter().enumerate() {
        let own = definition_name(f.name);
        let (define, undef) = dep_defines(f.deps, &order);
        out.push_str(&format!(
            "#undef SYMM_SITE_FN\n#define SYMM_SITE_FN {}u\n#define {own} {}\n{define}{}\n#undef {own}\n{undef}",
            k + 1,
            unique_name(k, f),
            f.source
        ));
    }
    out.push_str(&dep_defines(direct, &order).0);
    out
}

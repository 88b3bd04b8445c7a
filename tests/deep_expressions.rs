//! Deep and long expressions (#31): a 500-term `+` chain, a 300-link
//! `else if` chain and 300 nested negations, which crashed the macro
//! (rustc's stack overflowed) though plain rustc compiles them. They run
//! on the emulator against the same Rust outside a kernel, and compile with
//! NVRTC. Generated; the shapes, not the text, are the test.

use symm::dsl::*;
use symm::{run, symm_kernel, CommOptions, LaunchConfig, Ranks};

#[symm_kernel(device)]
fn long_sum(x: u32) -> u32 {
    x + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
        + x
}

fn long_sum_ref(x: u32) -> u32 {
    x * 500
}

#[symm_kernel(device)]
fn long_else_if(x: u32) -> u32 {
    if x == 0 {
        0
    } else if x == 1 {
        7
    } else if x == 2 {
        14
    } else if x == 3 {
        21
    } else if x == 4 {
        28
    } else if x == 5 {
        35
    } else if x == 6 {
        42
    } else if x == 7 {
        49
    } else if x == 8 {
        56
    } else if x == 9 {
        63
    } else if x == 10 {
        70
    } else if x == 11 {
        77
    } else if x == 12 {
        84
    } else if x == 13 {
        91
    } else if x == 14 {
        98
    } else if x == 15 {
        105
    } else if x == 16 {
        112
    } else if x == 17 {
        119
    } else if x == 18 {
        126
    } else if x == 19 {
        133
    } else if x == 20 {
        140
    } else if x == 21 {
        147
    } else if x == 22 {
        154
    } else if x == 23 {
        161
    } else if x == 24 {
        168
    } else if x == 25 {
        175
    } else if x == 26 {
        182
    } else if x == 27 {
        189
    } else if x == 28 {
        196
    } else if x == 29 {
        203
    } else if x == 30 {
        210
    } else if x == 31 {
        217
    } else if x == 32 {
        224
    } else if x == 33 {
        231
    } else if x == 34 {
        238
    } else if x == 35 {
        245
    } else if x == 36 {
        252
    } else if x == 37 {
        259
    } else if x == 38 {
        266
    } else if x == 39 {
        273
    } else if x == 40 {
        280
    } else if x == 41 {
        287
    } else if x == 42 {
        294
    } else if x == 43 {
        301
    } else if x == 44 {
        308
    } else if x == 45 {
        315
    } else if x == 46 {
        322
    } else if x == 47 {
        329
    } else if x == 48 {
        336
    } else if x == 49 {
        343
    } else if x == 50 {
        350
    } else if x == 51 {
        357
    } else if x == 52 {
        364
    } else if x == 53 {
        371
    } else if x == 54 {
        378
    } else if x == 55 {
        385
    } else if x == 56 {
        392
    } else if x == 57 {
        399
    } else if x == 58 {
        406
    } else if x == 59 {
        413
    } else if x == 60 {
        420
    } else if x == 61 {
        427
    } else if x == 62 {
        434
    } else if x == 63 {
        441
    } else if x == 64 {
        448
    } else if x == 65 {
        455
    } else if x == 66 {
        462
    } else if x == 67 {
        469
    } else if x == 68 {
        476
    } else if x == 69 {
        483
    } else if x == 70 {
        490
    } else if x == 71 {
        497
    } else if x == 72 {
        504
    } else if x == 73 {
        511
    } else if x == 74 {
        518
    } else if x == 75 {
        525
    } else if x == 76 {
        532
    } else if x == 77 {
        539
    } else if x == 78 {
        546
    } else if x == 79 {
        553
    } else if x == 80 {
        560
    } else if x == 81 {
        567
    } else if x == 82 {
        574
    } else if x == 83 {
        581
    } else if x == 84 {
        588
    } else if x == 85 {
        595
    } else if x == 86 {
        602
    } else if x == 87 {
        609
    } else if x == 88 {
        616
    } else if x == 89 {
        623
    } else if x == 90 {
        630
    } else if x == 91 {
        637
    } else if x == 92 {
        644
    } else if x == 93 {
        651
    } else if x == 94 {
        658
    } else if x == 95 {
        665
    } else if x == 96 {
        672
    } else if x == 97 {
        679
    } else if x == 98 {
        686
    } else if x == 99 {
        693
    } else if x == 100 {
        700
    } else if x == 101 {
        707
    } else if x == 102 {
        714
    } else if x == 103 {
        721
    } else if x == 104 {
        728
    } else if x == 105 {
        735
    } else if x == 106 {
        742
    } else if x == 107 {
        749
    } else if x == 108 {
        756
    } else if x == 109 {
        763
    } else if x == 110 {
        770
    } else if x == 111 {
        777
    } else if x == 112 {
        784
    } else if x == 113 {
        791
    } else if x == 114 {
        798
    } else if x == 115 {
        805
    } else if x == 116 {
        812
    } else if x == 117 {
        819
    } else if x == 118 {
        826
    } else if x == 119 {
        833
    } else if x == 120 {
        840
    } else if x == 121 {
        847
    } else if x == 122 {
        854
    } else if x == 123 {
        861
    } else if x == 124 {
        868
    } else if x == 125 {
        875
    } else if x == 126 {
        882
    } else if x == 127 {
        889
    } else if x == 128 {
        896
    } else if x == 129 {
        903
    } else if x == 130 {
        910
    } else if x == 131 {
        917
    } else if x == 132 {
        924
    } else if x == 133 {
        931
    } else if x == 134 {
        938
    } else if x == 135 {
        945
    } else if x == 136 {
        952
    } else if x == 137 {
        959
    } else if x == 138 {
        966
    } else if x == 139 {
        973
    } else if x == 140 {
        980
    } else if x == 141 {
        987
    } else if x == 142 {
        994
    } else if x == 143 {
        1001
    } else if x == 144 {
        1008
    } else if x == 145 {
        1015
    } else if x == 146 {
        1022
    } else if x == 147 {
        1029
    } else if x == 148 {
        1036
    } else if x == 149 {
        1043
    } else if x == 150 {
        1050
    } else if x == 151 {
        1057
    } else if x == 152 {
        1064
    } else if x == 153 {
        1071
    } else if x == 154 {
        1078
    } else if x == 155 {
        1085
    } else if x == 156 {
        1092
    } else if x == 157 {
        1099
    } else if x == 158 {
        1106
    } else if x == 159 {
        1113
    } else if x == 160 {
        1120
    } else if x == 161 {
        1127
    } else if x == 162 {
        1134
    } else if x == 163 {
        1141
    } else if x == 164 {
        1148
    } else if x == 165 {
        1155
    } else if x == 166 {
        1162
    } else if x == 167 {
        1169
    } else if x == 168 {
        1176
    } else if x == 169 {
        1183
    } else if x == 170 {
        1190
    } else if x == 171 {
        1197
    } else if x == 172 {
        1204
    } else if x == 173 {
        1211
    } else if x == 174 {
        1218
    } else if x == 175 {
        1225
    } else if x == 176 {
        1232
    } else if x == 177 {
        1239
    } else if x == 178 {
        1246
    } else if x == 179 {
        1253
    } else if x == 180 {
        1260
    } else if x == 181 {
        1267
    } else if x == 182 {
        1274
    } else if x == 183 {
        1281
    } else if x == 184 {
        1288
    } else if x == 185 {
        1295
    } else if x == 186 {
        1302
    } else if x == 187 {
        1309
    } else if x == 188 {
        1316
    } else if x == 189 {
        1323
    } else if x == 190 {
        1330
    } else if x == 191 {
        1337
    } else if x == 192 {
        1344
    } else if x == 193 {
        1351
    } else if x == 194 {
        1358
    } else if x == 195 {
        1365
    } else if x == 196 {
        1372
    } else if x == 197 {
        1379
    } else if x == 198 {
        1386
    } else if x == 199 {
        1393
    } else if x == 200 {
        1400
    } else if x == 201 {
        1407
    } else if x == 202 {
        1414
    } else if x == 203 {
        1421
    } else if x == 204 {
        1428
    } else if x == 205 {
        1435
    } else if x == 206 {
        1442
    } else if x == 207 {
        1449
    } else if x == 208 {
        1456
    } else if x == 209 {
        1463
    } else if x == 210 {
        1470
    } else if x == 211 {
        1477
    } else if x == 212 {
        1484
    } else if x == 213 {
        1491
    } else if x == 214 {
        1498
    } else if x == 215 {
        1505
    } else if x == 216 {
        1512
    } else if x == 217 {
        1519
    } else if x == 218 {
        1526
    } else if x == 219 {
        1533
    } else if x == 220 {
        1540
    } else if x == 221 {
        1547
    } else if x == 222 {
        1554
    } else if x == 223 {
        1561
    } else if x == 224 {
        1568
    } else if x == 225 {
        1575
    } else if x == 226 {
        1582
    } else if x == 227 {
        1589
    } else if x == 228 {
        1596
    } else if x == 229 {
        1603
    } else if x == 230 {
        1610
    } else if x == 231 {
        1617
    } else if x == 232 {
        1624
    } else if x == 233 {
        1631
    } else if x == 234 {
        1638
    } else if x == 235 {
        1645
    } else if x == 236 {
        1652
    } else if x == 237 {
        1659
    } else if x == 238 {
        1666
    } else if x == 239 {
        1673
    } else if x == 240 {
        1680
    } else if x == 241 {
        1687
    } else if x == 242 {
        1694
    } else if x == 243 {
        1701
    } else if x == 244 {
        1708
    } else if x == 245 {
        1715
    } else if x == 246 {
        1722
    } else if x == 247 {
        1729
    } else if x == 248 {
        1736
    } else if x == 249 {
        1743
    } else if x == 250 {
        1750
    } else if x == 251 {
        1757
    } else if x == 252 {
        1764
    } else if x == 253 {
        1771
    } else if x == 254 {
        1778
    } else if x == 255 {
        1785
    } else if x == 256 {
        1792
    } else if x == 257 {
        1799
    } else if x == 258 {
        1806
    } else if x == 259 {
        1813
    } else if x == 260 {
        1820
    } else if x == 261 {
        1827
    } else if x == 262 {
        1834
    } else if x == 263 {
        1841
    } else if x == 264 {
        1848
    } else if x == 265 {
        1855
    } else if x == 266 {
        1862
    } else if x == 267 {
        1869
    } else if x == 268 {
        1876
    } else if x == 269 {
        1883
    } else if x == 270 {
        1890
    } else if x == 271 {
        1897
    } else if x == 272 {
        1904
    } else if x == 273 {
        1911
    } else if x == 274 {
        1918
    } else if x == 275 {
        1925
    } else if x == 276 {
        1932
    } else if x == 277 {
        1939
    } else if x == 278 {
        1946
    } else if x == 279 {
        1953
    } else if x == 280 {
        1960
    } else if x == 281 {
        1967
    } else if x == 282 {
        1974
    } else if x == 283 {
        1981
    } else if x == 284 {
        1988
    } else if x == 285 {
        1995
    } else if x == 286 {
        2002
    } else if x == 287 {
        2009
    } else if x == 288 {
        2016
    } else if x == 289 {
        2023
    } else if x == 290 {
        2030
    } else if x == 291 {
        2037
    } else if x == 292 {
        2044
    } else if x == 293 {
        2051
    } else if x == 294 {
        2058
    } else if x == 295 {
        2065
    } else if x == 296 {
        2072
    } else if x == 297 {
        2079
    } else if x == 298 {
        2086
    } else if x == 299 {
        2093
    } else {
        1
    }
}

fn long_else_if_ref(x: u32) -> u32 {
    if x < 300 {
        x * 7
    } else {
        1
    }
}

#[symm_kernel(device)]
fn deep_negation(v: i32) -> i32 {
    -(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(v))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))
}

#[symm_kernel]
fn deep(x: &[u32], out: &mut [u32], n: u32) {
    let i = thread_idx_x();
    if i < n {
        let v = x[i];
        out[i] = long_sum(v) ^ long_else_if(v) ^ (deep_negation(v as i32) as u32);
    }
}

symm::check_kernels!(
    fn deep_expressions_compile;
    deep,
);

#[test]
fn deep_expressions_run_on_the_emulator() {
    let x: Vec<u32> = (0..256).map(|_| rand::random::<u32>() % 400).collect();
    let got = run(Ranks::Emulator(1), CommOptions::default(), |comm| {
        let dx = comm.device_buffer_from(&x)?;
        let mut out = comm.device_buffer_from(&vec![0xDEAD_BEEFu32; x.len()])?;
        deep::launch(
            comm,
            LaunchConfig::linear(1, 256),
            &dx,
            &mut out,
            x.len() as u32,
        )?;
        out.to_host()
    })
    .unwrap();
    let want: Vec<u32> = x
        .iter()
        .map(|&v| long_sum_ref(v) ^ long_else_if_ref(v) ^ v)
        .collect();
    symm::compare_bits(&got[0], &want).unwrap();
}

/// A register array of 256 KiB (four times the emulator's old thread
/// stack, which killed the process with no message) runs on the emulator.
#[symm_kernel]
fn big_array<const N: usize>(x: &[u32], out: &mut [u32], n: u32) {
    let i = thread_idx_x();
    if i < n {
        let mut a = [0u32; N];
        for k in 0..N {
            a[k] = x[i].wrapping_add(k as u32);
        }
        let mut s = 0u32;
        for k in 0..N {
            s = s.wrapping_add(a[N - 1 - k] ^ (k as u32));
        }
        out[i] = s;
    }
}

#[test]
fn a_large_register_array_runs_on_the_emulator() {
    const N: usize = 64 * 1024;
    let x: Vec<u32> = (0..64).map(|_| rand::random::<u32>()).collect();
    let got = run(Ranks::Emulator(1), CommOptions::default(), |comm| {
        let dx = comm.device_buffer_from(&x)?;
        let mut out = comm.device_buffer_from(&vec![0xDEAD_BEEFu32; x.len()])?;
        big_array::launch::<N>(
            comm,
            LaunchConfig::linear(1, 64),
            &dx,
            &mut out,
            x.len() as u32,
        )?;
        out.to_host()
    })
    .unwrap();
    let want: Vec<u32> = x
        .iter()
        .map(|&v| {
            (0..N).fold(0u32, |s, k| {
                s.wrapping_add(v.wrapping_add((N - 1 - k) as u32) ^ k as u32)
            })
        })
        .collect();
    symm::compare_bits(&got[0], &want).unwrap();
}

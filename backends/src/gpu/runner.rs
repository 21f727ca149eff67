//! The runner: executes a [`Module`] with wgpu on an adapter of this machine.
//!
//! Every array gets a storage buffer holding its initial contents (`f16` and `f32` as `f32`,
//! `i32` as `i32`); the host program is evaluated on the CPU, and each launch it reaches becomes
//! one dispatch, in order, in one compute pass (WebGPU orders the dispatches' memory accesses),
//! with its uniform block (the parameters and the host loop variables) in its own 256-byte slot
//! of one uniform buffer bound with a dynamic offset. The kernel's time is the wall clock
//! around `queue.submit` and the wait for the queue to finish, on a second run (the inputs
//! restored) after a first one that lets the driver compile what it compiles lazily. Live-out arrays are copied back
//! through mapped buffers.

use std::time::Instant;

use polyhedral::ast::{AstCond, AstExpr};
use polyhedral::interp::{self, Memory};
use polyhedral::program::{ArrayId, Program, ScalarType};
use wgpu::util::DeviceExt;

use super::host::{HostOp, KernelMapping, MappedLoop};
use super::writer::Module;
use super::{Error, Limits, Options};
use crate::compare::{compare_with, keeps_arrays, Comparison, Specials};

/// What a kernel run produced.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuRun {
    /// Every live-out array's final contents, in [`ArrayId`] order.
    pub outputs: Vec<(ArrayId, Vec<f64>)>,
    /// Seconds the dispatches took: between the GPU's timestamps at the start and the end of
    /// their compute pass where the adapter has timestamp queries, else from submitting them
    /// to their completion.
    pub kernel_seconds: f64,
    /// Whether [`Self::kernel_seconds`] was measured with timestamp queries.
    pub timestamps: bool,
    /// The adapter's name.
    pub adapter: String,
    pub dispatches: usize,
}

const SLOT: u64 = 256;

struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    name: String,
    limits: wgpu::Limits,
    /// Whether the device was opened with timestamp queries.
    timestamps: bool,
}

fn pick_adapter(wanted: Option<&str>) -> Result<wgpu::Adapter, Error> {
    // Mesa's device-selection layer only reorders the devices, which are chosen here, and
    // without a desktop session it complains on stderr about every instance.
    if std::env::var_os("NODEVICE_SELECT").is_none() {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    let env = std::env::var("POLYFUSE_GPU_ADAPTER").ok();
    let wanted = wanted.map(str::to_string).or(env);
    if adapters.is_empty() {
        return Err(Error::NoAdapter(
            "no Vulkan device found; install a GPU driver, or Mesa's software one: \
             apt-get install mesa-vulkan-drivers libvulkan1"
                .into(),
        ));
    }
    let names: Vec<String> = adapters.iter().map(|a| a.get_info().name).collect();
    let index = match &wanted {
        Some(w) => names
            .iter()
            .position(|n| n.to_lowercase().contains(&w.to_lowercase()))
            .ok_or_else(|| {
                Error::NoAdapter(format!(
                    "no adapter matches `{w}`; found: {}",
                    names.join(", ")
                ))
            })?,
        // A real GPU before a software one.
        None => adapters
            .iter()
            .position(|a| a.get_info().device_type != wgpu::DeviceType::Cpu)
            .unwrap_or(0),
    };
    Ok(adapters
        .into_iter()
        .nth(index)
        .expect("the index is of an adapter in the list"))
}

fn open(wanted: Option<&str>) -> Result<Gpu, Error> {
    let adapter = pick_adapter(wanted)?;
    let limits = adapter.limits();
    let features =
        adapter.features() & (wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::SHADER_F16);
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("polyfuse"),
        required_features: features,
        required_limits: limits.clone(),
        ..Default::default()
    }))
    .map_err(|e| Error::Device(e.to_string()))?;
    Ok(Gpu {
        device,
        queue,
        name: adapter.get_info().name,
        limits,
        timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY),
    })
}

/// The limits of the adapter `wanted` (or the default one) as the GPU target's description.
pub fn adapter_limits(wanted: Option<&str>) -> Result<(String, Limits), Error> {
    let adapter = pick_adapter(wanted)?;
    let l = adapter.limits();
    Ok((
        adapter.get_info().name,
        Limits {
            max_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
            max_workgroup_size: [
                l.max_compute_workgroup_size_x,
                l.max_compute_workgroup_size_y,
                l.max_compute_workgroup_size_z,
            ],
            max_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
            workgroup_memory_bytes: l.max_compute_workgroup_storage_size,
            subgroup_width: adapter.get_info().subgroup_min_size.max(1),
            loop_iterations: loop_cap(&adapter.get_info()),
            f16_storage: adapter.features().contains(wgpu::Features::SHADER_F16),
        },
    ))
}

/// The loop cap of the adapter's driver ([`Limits::loop_iterations`]): Mesa's llvmpipe leaves
/// every loop after `LP_MAX_TGSI_LOOP_ITERATIONS` (65535) iterations of one invocation.
fn loop_cap(info: &wgpu::AdapterInfo) -> Option<u32> {
    let llvmpipe = [&info.name, &info.driver, &info.driver_info]
        .iter()
        .any(|s| s.to_lowercase().contains("llvmpipe"));
    llvmpipe.then_some(65535)
}

struct Dispatch {
    kernel: usize,
    uniforms: Vec<i32>,
    grid: [u32; 3],
}

/// Evaluates the host program: every dispatch in order.
fn dispatches(program: &Program, module: &Module, limits: &Limits) -> Vec<Dispatch> {
    let params = program.param_values();
    let mut out = Vec::new();
    let mut bindings: Vec<(String, i64)> = Vec::new();
    walk(
        module,
        limits,
        &module.host,
        &params,
        &mut bindings,
        &mut out,
    );
    out
}

fn lookup(bindings: &[(String, i64)], name: &str) -> i64 {
    bindings
        .iter()
        .rev()
        .find(|(n, _)| n == name)
        .map_or(0, |(_, v)| *v)
}

fn eval(e: &AstExpr, bindings: &[(String, i64)], params: &[i64]) -> i64 {
    e.eval(&|n| lookup(bindings, n), params)
}

fn holds(c: &AstCond, bindings: &[(String, i64)], params: &[i64]) -> bool {
    match c {
        AstCond::NonNegative(e) => eval(e, bindings, params) >= 0,
        AstCond::Zero(e) => eval(e, bindings, params) == 0,
        AstCond::Divisible(e, k) => eval(e, bindings, params).rem_euclid(*k) == 0,
    }
}

fn walk(
    module: &Module,
    limits: &Limits,
    ops: &[HostOp],
    params: &[i64],
    bindings: &mut Vec<(String, i64)>,
    out: &mut Vec<Dispatch>,
) {
    for op in ops {
        match op {
            HostOp::Loop {
                var,
                lower,
                upper,
                step,
                body,
            } => {
                let (lo, hi) = (eval(lower, bindings, params), eval(upper, bindings, params));
                let mut v = lo;
                while v <= hi {
                    bindings.push((var.clone(), v));
                    walk(module, limits, body, params, bindings, out);
                    bindings.pop();
                    v += step;
                }
            }
            HostOp::If {
                conds,
                then,
                otherwise,
            } => {
                let branch = if conds.iter().all(|c| holds(c, bindings, params)) {
                    then
                } else {
                    otherwise
                };
                walk(module, limits, branch, params, bindings, out);
            }
            HostOp::Launch { kernel } => {
                let k = &module.kernels[*kernel];
                let mut uniforms: Vec<i32> = params.iter().map(|&p| p as i32).collect();
                for v in &module.host_vars {
                    uniforms.push(lookup(bindings, v) as i32);
                }
                // `zero`: 0.0f32.
                uniforms.push(0);
                let loops = k.grid_loops();
                let mut maxima = vec![0i64; loops.len()];
                let mut budget = 1 << 16;
                max_trips(loops, 0, bindings, params, &mut maxima, &mut budget);
                let block = module.blocks[*kernel];
                let n = loops.len();
                let mut grid = [1u32; 3];
                for (j, &m) in maxima.iter().enumerate() {
                    let d = n - 1 - j;
                    let per = match k.mapping {
                        KernelMapping::Flat { .. } => i64::from(block[d]),
                        _ => 1,
                    };
                    let count = (m + per - 1) / per;
                    grid[d] = count.clamp(0, i64::from(limits.max_workgroups_per_dimension)) as u32;
                }
                if grid.iter().all(|&g| g > 0) {
                    out.push(Dispatch {
                        kernel: *kernel,
                        uniforms,
                        grid,
                    });
                }
            }
        }
    }
}

/// The largest trip count of each mapped loop over the values of the loops outside it;
/// when the enumeration would take more than `budget` steps, the rest count as unbounded
/// (the grid then takes the per-dimension limit, which the folded loops make correct).
fn max_trips(
    loops: &[MappedLoop],
    j: usize,
    bindings: &mut Vec<(String, i64)>,
    params: &[i64],
    maxima: &mut [i64],
    budget: &mut i64,
) {
    let Some(l) = loops.get(j) else { return };
    let (lo, hi) = (
        eval(&l.lower, bindings, params),
        eval(&l.upper, bindings, params),
    );
    if hi < lo {
        return;
    }
    let trips = (hi - lo) / l.step + 1;
    maxima[j] = maxima[j].max(trips);
    if j + 1 == loops.len() {
        return;
    }
    if *budget < trips {
        for m in &mut maxima[j + 1..] {
            *m = i64::MAX / 2;
        }
        return;
    }
    *budget -= trips;
    let mut v = lo;
    while v <= hi {
        bindings.push((l.var.clone(), v));
        max_trips(loops, j + 1, bindings, params, maxima, budget);
        bindings.pop();
        v += l.step;
    }
}

/// Whether the module stores array `id` as `f16`.
fn half(program: &Program, module: &Module, id: ArrayId) -> bool {
    module.f16_storage && program.array(id).elem == ScalarType::F16
}

fn encode(program: &Program, module: &Module, id: ArrayId, values: &[f64]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(values.len() * 4 + 4);
    if half(program, module, id) {
        values
            .iter()
            .for_each(|&v| bytes.extend(half::f16::from_f64(v).to_le_bytes()));
    } else if program.array(id).elem == ScalarType::I32 {
        values
            .iter()
            .for_each(|&v| bytes.extend((v as i32).to_le_bytes()));
    } else {
        values
            .iter()
            .for_each(|&v| bytes.extend((v as f32).to_le_bytes()));
    }
    // Buffer sizes are whole, non-zero numbers of 32-bit words.
    bytes.resize(bytes.len().div_ceil(4).max(1) * 4, 0);
    bytes
}

fn decode(program: &Program, module: &Module, id: ArrayId, bytes: &[u8]) -> Vec<f64> {
    let len = program.array_len(id);
    if half(program, module, id) {
        return bytes
            .chunks_exact(2)
            .take(len)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect();
    }
    let ty = program.array(id).elem;
    bytes
        .chunks_exact(4)
        .take(len)
        .map(|c| {
            let b = [c[0], c[1], c[2], c[3]];
            match ty {
                ScalarType::I32 => i32::from_le_bytes(b) as f64,
                _ => f32::from_le_bytes(b) as f64,
            }
        })
        .collect()
}

/// Runs `module` (written for `program`) on `inputs` (the initial contents of every array).
pub fn run(
    program: &Program,
    module: &Module,
    inputs: &Memory,
    options: &Options,
) -> Result<GpuRun, Error> {
    let gpu = open(options.adapter.as_deref())?;
    let device = &gpu.device;
    let limits = Limits {
        max_workgroups_per_dimension: gpu
            .limits
            .max_compute_workgroups_per_dimension
            .min(options.limits.max_workgroups_per_dimension),
        ..options.limits
    };
    let error_scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(&program.name),
        source: wgpu::ShaderSource::Wgsl(module.wgsl.as_str().into()),
    });

    let n_uniforms = program.params.len() + module.host_vars.len() + 1;
    let uniform_size = ((n_uniforms * 4).div_ceil(16) * 16) as u64;
    let mut entries = vec![wgpu::BindGroupLayoutEntry {
        binding: 0,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: true,
            min_binding_size: wgpu::BufferSize::new(uniform_size),
        },
        count: None,
    }];
    for (k, _) in program.arrays.iter().enumerate() {
        entries.push(wgpu::BindGroupLayoutEntry {
            binding: k as u32 + 1,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage {
                    read_only: module.read_only[k],
                },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        });
    }
    let status_binding = program.arrays.len() as u32 + 1;
    if module.loop_guard {
        entries.push(wgpu::BindGroupLayoutEntry {
            binding: status_binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: false },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        });
    }
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: None,
        entries: &entries,
    });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: None,
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    let pipelines: Vec<wgpu::ComputePipeline> = module
        .kernels
        .iter()
        .map(|k| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&k.name),
                layout: Some(&pipeline_layout),
                module: &shader,
                entry_point: Some(&k.name),
                compilation_options: Default::default(),
                cache: None,
            })
        })
        .collect();

    // An array the device cannot bind is refused before anything runs (wgpu would only
    // report it as a validation error of the bind group).
    let most = gpu
        .limits
        .max_storage_buffer_binding_size
        .min(gpu.limits.max_buffer_size);
    let mut buffers: Vec<wgpu::Buffer> = Vec::with_capacity(program.arrays.len());
    for (k, a) in program.arrays.iter().enumerate() {
        let id = ArrayId(k as u32);
        // A tile-local temporary's buffer is bound but never accessed: one element.
        let contents = if module.tile_local[k] {
            vec![0u8; 4]
        } else {
            encode(program, module, id, inputs.array(id))
        };
        if contents.len() as u64 > most {
            return Err(Error::DoesNotFit {
                array: a.name.clone(),
                bytes: contents.len() as u64,
                adapter: gpu.name.clone(),
                limit: most,
            });
        }
        buffers.push(
            device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(&a.name),
                contents: &contents,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
            }),
        );
    }

    let list = dispatches(program, module, &limits);
    let mut slots = vec![0u8; (list.len().max(1) as u64 * SLOT) as usize];
    for (i, d) in list.iter().enumerate() {
        let at = i * SLOT as usize;
        for (j, v) in d.uniforms.iter().enumerate() {
            slots[at + 4 * j..at + 4 * j + 4].copy_from_slice(&v.to_le_bytes());
        }
    }
    let uniforms = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("uniforms"),
        contents: &slots,
        usage: wgpu::BufferUsages::UNIFORM,
    });
    let mut bind_entries = vec![wgpu::BindGroupEntry {
        binding: 0,
        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: &uniforms,
            offset: 0,
            size: wgpu::BufferSize::new(uniform_size),
        }),
    }];
    for (k, b) in buffers.iter().enumerate() {
        bind_entries.push(wgpu::BindGroupEntry {
            binding: k as u32 + 1,
            resource: b.as_entire_binding(),
        });
    }
    let status = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("status"),
        contents: &[0u8; 4],
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
    });
    if module.loop_guard {
        bind_entries.push(wgpu::BindGroupEntry {
            binding: status_binding,
            resource: status.as_entire_binding(),
        });
    }
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &layout,
        entries: &bind_entries,
    });

    let queries = gpu.timestamps.then(|| {
        let set = device.create_query_set(&wgpu::QuerySetDescriptor {
            label: None,
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        });
        let resolved = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("timestamps"),
            size: 16,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        (set, resolved)
    });
    let record = || {
        let mut encoder =
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: queries.as_ref().map(|(set, _)| {
                    wgpu::ComputePassTimestampWrites {
                        query_set: set,
                        beginning_of_pass_write_index: Some(0),
                        end_of_pass_write_index: Some(1),
                    }
                }),
            });
            for (i, d) in list.iter().enumerate() {
                pass.set_pipeline(&pipelines[d.kernel]);
                pass.set_bind_group(0, &bind_group, &[(i as u64 * SLOT) as u32]);
                pass.dispatch_workgroups(d.grid[0], d.grid[1], d.grid[2]);
            }
        }
        if let Some((set, resolved)) = &queries {
            encoder.resolve_query_set(set, 0..2, resolved, 0);
        }
        encoder.finish()
    };
    let wait = || {
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| Error::Device(e.to_string()))
    };
    // A first run compiles what the driver compiles lazily; the inputs are then restored and
    // the second run is timed.
    gpu.queue.submit([record()]);
    wait()?;
    if let Some(e) = pollster::block_on(error_scope.pop()) {
        return Err(Error::Device(e.to_string()));
    }
    if module.loop_guard && read_back(&gpu, &status)?.iter().any(|&b| b != 0) {
        return Err(Error::LoopLimit {
            adapter: gpu.name.clone(),
            limit: limits.loop_iterations.unwrap_or(0),
        });
    }
    for (k, b) in buffers.iter().enumerate() {
        if module.tile_local[k] {
            continue;
        }
        let id = ArrayId(k as u32);
        gpu.queue
            .write_buffer(b, 0, &encode(program, module, id, inputs.array(id)));
    }
    let commands = record();
    gpu.queue.submit([]);
    wait()?;
    let start = Instant::now();
    gpu.queue.submit([commands]);
    wait()?;
    let mut kernel_seconds = start.elapsed().as_secs_f64();
    let mut timestamps = false;
    if let Some((_, resolved)) = &queries {
        let bytes = read_back(&gpu, resolved)?;
        let tick = |k: usize| u64::from_le_bytes(bytes[8 * k..8 * k + 8].try_into().unwrap());
        let (begin, end) = (tick(0), tick(1));
        // A driver may leave the queries unwritten (zero): the wall clock stands then.
        if end > begin {
            let period = f64::from(gpu.queue.get_timestamp_period());
            kernel_seconds = (end - begin) as f64 * period * 1e-9;
            timestamps = true;
        }
    }

    let mut outputs = Vec::new();
    for (k, a) in program.arrays.iter().enumerate() {
        if a.role.is_live_out() {
            let id = ArrayId(k as u32);
            outputs.push((
                id,
                decode(program, module, id, &read_back(&gpu, &buffers[k])?),
            ));
        }
    }
    Ok(GpuRun {
        outputs,
        kernel_seconds,
        timestamps,
        adapter: gpu.name,
        dispatches: list.len(),
    })
}

/// The contents of `buffer`, copied back from the device.
fn read_back(gpu: &Gpu, buffer: &wgpu::Buffer) -> Result<Vec<u8>, Error> {
    let size = buffer.size();
    let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = gpu
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, size);
    gpu.queue.submit([encoder.finish()]);
    staging.map_async(wgpu::MapMode::Read, .., |_| {});
    gpu.device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| Error::Device(e.to_string()))?;
    let view = staging
        .get_mapped_range(..)
        .map_err(|e| Error::Device(e.to_string()))?;
    Ok(view.to_vec())
}

/// The result of [`check`].
#[derive(Clone, Debug, PartialEq)]
pub struct GpuCheckReport {
    pub comparison: Comparison,
    pub outputs: Vec<(ArrayId, Vec<f64>)>,
    pub kernel_seconds: f64,
    /// Whether the time comes from timestamp queries (else from the wall clock).
    pub timestamps: bool,
    pub adapter: String,
    pub dispatches: usize,
    pub seed: u64,
}

impl GpuCheckReport {
    /// What `polyfuse run --target gpu` prints.
    pub fn to_text(&self, program: &Program) -> String {
        let mut out = format!(
            "kernel {} on gpu ({}, seed {}, {} dispatches)\n",
            program.name, self.adapter, self.seed, self.dispatches
        );
        out += &self.comparison.to_text(program);
        let clock = if self.timestamps {
            "GPU timestamps"
        } else {
            "wall clock"
        };
        out += &format!("kernel time: {:.6} s ({clock})\n", self.kernel_seconds);
        out += &self.comparison.verdict();
        out
    }
}

/// Runs the interpreter on `reference` and `module` (written for `program`, which keeps the
/// reference's arrays in order and may add temporaries) on the random inputs of `seed`, and
/// compares every live-out array of the reference.
pub fn check(
    reference: &Program,
    program: &Program,
    module: &Module,
    options: &Options,
    seed: u64,
) -> Result<GpuCheckReport, Error> {
    if !keeps_arrays(reference, program) {
        return Err(Error::InvalidProgram(
            "the rewritten program does not keep the original's arrays".into(),
        ));
    }
    let mut expected = interp::random_inputs(reference, seed);
    interp::run(reference, &mut expected)?;
    let inputs = interp::random_inputs(program, seed);
    let gpu = run(program, module, &inputs, options)?;
    Ok(GpuCheckReport {
        comparison: compare_with(
            reference,
            &expected,
            &gpu.outputs,
            Specials::UnspecifiedByWgsl,
        ),
        outputs: gpu.outputs,
        kernel_seconds: gpu.kernel_seconds,
        timestamps: gpu.timestamps,
        adapter: gpu.adapter,
        dispatches: gpu.dispatches,
        seed,
    })
}

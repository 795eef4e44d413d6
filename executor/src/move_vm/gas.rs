//! The adapter's gas meter: the VM's `GasMeter` trait over a per-instruction, per-byte cost table,
//! with a limit per transaction.
//!
//! The costs are Diem's initial gas schedule, the one its genesis published:
//! `INITIAL_GAS_SCHEDULE` in `language/move-vm/types/src/gas_schedule.rs` and `GasConstants::
//! default()` in `language/move-core/types/src/gas_schedule.rs` of github.com/diem/diem at commit
//! 516b1d9c (July 2021, the Diem of the DiemVM the testbed's report measured). The table below is
//! written from those numbers; how they are applied follows Diem's interpreter of the same commit:
//! - every entry is Diem's `instruction_gas + memory_gas` (`GasCost::total`), in Diem's internal
//!   units (1,000 internal units are one gas unit, `gas_unit_scaling_factor`);
//! - instructions over data (copy, move and store of locals, read and write through a reference,
//!   equality, pack and unpack, constants, `move_to`/`move_from`) cost that times the data's
//!   abstract memory size (at least 1), as Diem's `charge_instr_with_size`;
//! - a call costs `CALL` once and once per argument, as Diem charged it;
//! - the vector instructions of this Move version were natives in Diem: they cost what Diem's
//!   native table charged (`Vector::empty` 84+1, `length` 98+1, and so on), times the element
//!   count for pack and unpack;
//! - reading a resource from storage costs `global_memory_per_byte_cost` (4) per byte, and a
//!   transaction pays Diem's intrinsic gas before it runs: `min_transaction_gas_units` (600),
//!   plus `intrinsic_gas_per_byte` (8) per byte beyond `large_transaction_cutoff` (600 bytes).

use move_binary_format::errors::{PartialVMError, PartialVMResult};
use move_core_types::gas_algebra::{InternalGas, NumArgs, NumBytes};
use move_core_types::language_storage::ModuleId;
use move_core_types::vm_status::StatusCode;
use move_vm_types::gas::{GasMeter, SimpleInstruction};
use move_vm_types::views::{TypeView, ValueView};

/// Internal units per gas unit (Diem's `gas_unit_scaling_factor`). Limits and fees are in gas
/// units; the table is in internal units.
pub const INTERNAL_UNITS_PER_GAS: u64 = 1_000;

/// Diem's `min_transaction_gas_units`: what any transaction pays before its first instruction.
const MIN_TRANSACTION_GAS: u64 = 600;
/// Diem's `large_transaction_cutoff` (bytes) and `intrinsic_gas_per_byte` beyond it.
const LARGE_TRANSACTION_CUTOFF: u64 = 600;
const INTRINSIC_GAS_PER_BYTE: u64 = 8;
/// Diem's `global_memory_per_byte_cost`: per byte of a resource read from storage.
const GLOBAL_MEMORY_PER_BYTE: u64 = 4;
/// Diem's `REFERENCE_SIZE`: the size Diem's interpreter charged a global borrow for (the size of
/// the reference it pushes).
const REFERENCE_SIZE: u64 = 8;
/// Diem's `MIN_EXISTS_DATA_SIZE`: what `exists` is charged for.
const EXISTS_SIZE: u64 = 100;

/// `instruction_gas + memory_gas` of Diem's initial schedule for the instructions that carry no
/// data size.
fn simple_cost(instruction: SimpleInstruction) -> u64 {
    use SimpleInstruction::*;
    match instruction {
        Nop => 1 + 1,
        Ret => 638 + 1,
        BrTrue | BrFalse | Branch => 1 + 1,
        Pop => 1 + 1,
        LdU8 | LdU64 | LdU128 | LdTrue | LdFalse => 1 + 1,
        FreezeRef => 1 + 1,
        MutBorrowLoc => 2 + 1,
        ImmBorrowLoc => 1 + 1,
        ImmBorrowField | MutBorrowField | ImmBorrowFieldGeneric | MutBorrowFieldGeneric => 1 + 1,
        CastU8 => 2 + 1,
        CastU64 | CastU128 => 1 + 1,
        Add | Sub | Mul | Mod => 1 + 1,
        Div => 3 + 1,
        BitOr | BitAnd => 2 + 1,
        Xor => 1 + 1,
        Shl => 2 + 1,
        Shr => 1 + 1,
        Or => 2 + 1,
        And | Not => 1 + 1,
        Lt | Gt | Ge => 1 + 1,
        Le => 2 + 1,
        Abort => 1 + 1,
    }
}

// Instructions over data: cost per unit of abstract memory size.
const LD_CONST: u64 = 1 + 1;
const COPY_LOC: u64 = 1 + 1;
const MOVE_LOC: u64 = 1 + 1;
const ST_LOC: u64 = 1 + 1;
const READ_REF: u64 = 1 + 1;
const WRITE_REF: u64 = 1 + 1;
const EQ: u64 = 1 + 1;
const NEQ: u64 = 1 + 1;
const PACK: u64 = 2 + 1;
const PACK_GENERIC: u64 = 2 + 1;
const UNPACK: u64 = 2 + 1;
const UNPACK_GENERIC: u64 = 2 + 1;
const CALL: u64 = 1132 + 1;
const CALL_GENERIC: u64 = 582 + 1;
const MUT_BORROW_GLOBAL: u64 = 21 + 1;
const MUT_BORROW_GLOBAL_GENERIC: u64 = 15 + 1;
const IMM_BORROW_GLOBAL: u64 = 23 + 1;
const IMM_BORROW_GLOBAL_GENERIC: u64 = 14 + 1;
const EXISTS: u64 = 41 + 1;
const EXISTS_GENERIC: u64 = 34 + 1;
const MOVE_FROM: u64 = 459 + 1;
const MOVE_FROM_GENERIC: u64 = 13 + 1;
const MOVE_TO: u64 = 13 + 1;
const MOVE_TO_GENERIC: u64 = 27 + 1;
// Diem's vector natives (`N::EMPTY`, `LENGTH`, `BORROW`, `BORROW_MUT`, `PUSH_BACK`, `POP_BACK`,
// `DESTROY_EMPTY`, `SWAP`), now instructions.
const VEC_PACK: u64 = 84 + 1;
const VEC_LEN: u64 = 98 + 1;
const VEC_IMM_BORROW: u64 = 1334 + 1;
const VEC_MUT_BORROW: u64 = 1902 + 1;
const VEC_PUSH_BACK: u64 = 53 + 1;
const VEC_POP_BACK: u64 = 227 + 1;
const VEC_UNPACK: u64 = 572 + 1;
const VEC_SWAP: u64 = 1436 + 1;

/// Diem's intrinsic gas of a transaction of `size` bytes, in internal units.
pub fn intrinsic_gas(size: usize) -> u64 {
    let beyond = (size as u64).saturating_sub(LARGE_TRANSACTION_CUTOFF);
    MIN_TRANSACTION_GAS + INTRINSIC_GAS_PER_BYTE * beyond
}

/// Gas left for one transaction, in internal units. Running out zeroes it and fails with
/// `OUT_OF_GAS`, which aborts the payload.
#[derive(Clone, Debug)]
pub struct Meter {
    limit: u64,
    left: u64,
}

impl Meter {
    /// A meter for at most `max_gas` gas units.
    pub fn new(max_gas: u64) -> Self {
        Self::with_internal_limit(max_gas.saturating_mul(INTERNAL_UNITS_PER_GAS))
    }

    /// A meter for at most `limit` internal units (finer than a gas unit: tests stop a
    /// transaction at every instruction).
    pub fn with_internal_limit(limit: u64) -> Self {
        Meter { limit, left: limit }
    }

    /// Charges `amount` internal units.
    pub fn charge(&mut self, amount: u64) -> PartialVMResult<()> {
        match self.left.checked_sub(amount) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => {
                self.left = 0;
                Err(PartialVMError::new(StatusCode::OUT_OF_GAS))
            }
        }
    }

    /// Internal units used so far.
    pub fn used_internal(&self) -> u64 {
        self.limit - self.left
    }

    /// Gas units used, rounded up, as Diem derived them (maximum minus what is left, rounded
    /// down): a transaction pays for every started gas unit.
    pub fn used(&self) -> u64 {
        self.used_internal().div_ceil(INTERNAL_UNITS_PER_GAS)
    }

    fn sized(&mut self, per_unit: u64, size: u64) -> PartialVMResult<()> {
        self.charge(per_unit.saturating_mul(size.max(1)))
    }
}

fn size(value: impl ValueView) -> u64 {
    value.legacy_abstract_memory_size().into()
}

fn sizes(values: impl Iterator<Item = impl ValueView>) -> u64 {
    values.map(size).fold(0, u64::saturating_add)
}

impl GasMeter for Meter {
    fn charge_simple_instr(&mut self, instr: SimpleInstruction) -> PartialVMResult<()> {
        self.charge(simple_cost(instr))
    }

    fn charge_call(
        &mut self,
        _module_id: &ModuleId,
        _func_name: &str,
        args: impl ExactSizeIterator<Item = impl ValueView>,
    ) -> PartialVMResult<()> {
        self.charge(CALL.saturating_mul(1 + args.len() as u64))
    }

    fn charge_call_generic(
        &mut self,
        _module_id: &ModuleId,
        _func_name: &str,
        ty_args: impl ExactSizeIterator<Item = impl TypeView>,
        args: impl ExactSizeIterator<Item = impl ValueView>,
    ) -> PartialVMResult<()> {
        let units = 1 + ty_args.len() as u64 + args.len() as u64;
        self.charge(CALL_GENERIC.saturating_mul(units))
    }

    fn charge_ld_const(&mut self, size: NumBytes) -> PartialVMResult<()> {
        self.sized(LD_CONST, size.into())
    }

    fn charge_copy_loc(&mut self, val: impl ValueView) -> PartialVMResult<()> {
        self.sized(COPY_LOC, size(val))
    }

    fn charge_move_loc(&mut self, val: impl ValueView) -> PartialVMResult<()> {
        self.sized(MOVE_LOC, size(val))
    }

    fn charge_store_loc(&mut self, val: impl ValueView) -> PartialVMResult<()> {
        self.sized(ST_LOC, size(val))
    }

    fn charge_pack(
        &mut self,
        is_generic: bool,
        args: impl ExactSizeIterator<Item = impl ValueView>,
    ) -> PartialVMResult<()> {
        let cost = if is_generic { PACK_GENERIC } else { PACK };
        self.sized(cost, sizes(args))
    }

    fn charge_unpack(
        &mut self,
        is_generic: bool,
        args: impl ExactSizeIterator<Item = impl ValueView>,
    ) -> PartialVMResult<()> {
        let cost = if is_generic { UNPACK_GENERIC } else { UNPACK };
        self.sized(cost, sizes(args))
    }

    fn charge_read_ref(&mut self, ref_val: impl ValueView) -> PartialVMResult<()> {
        self.sized(READ_REF, size(ref_val))
    }

    fn charge_write_ref(&mut self, val: impl ValueView) -> PartialVMResult<()> {
        self.sized(WRITE_REF, size(val))
    }

    fn charge_eq(&mut self, lhs: impl ValueView, rhs: impl ValueView) -> PartialVMResult<()> {
        self.sized(EQ, size(lhs).saturating_add(size(rhs)))
    }

    fn charge_neq(&mut self, lhs: impl ValueView, rhs: impl ValueView) -> PartialVMResult<()> {
        self.sized(NEQ, size(lhs).saturating_add(size(rhs)))
    }

    fn charge_borrow_global(
        &mut self,
        is_mut: bool,
        is_generic: bool,
        _ty: impl TypeView,
        _is_success: bool,
    ) -> PartialVMResult<()> {
        let cost = match (is_mut, is_generic) {
            (true, false) => MUT_BORROW_GLOBAL,
            (true, true) => MUT_BORROW_GLOBAL_GENERIC,
            (false, false) => IMM_BORROW_GLOBAL,
            (false, true) => IMM_BORROW_GLOBAL_GENERIC,
        };
        self.sized(cost, REFERENCE_SIZE)
    }

    fn charge_exists(
        &mut self,
        is_generic: bool,
        _ty: impl TypeView,
        _exists: bool,
    ) -> PartialVMResult<()> {
        let cost = if is_generic { EXISTS_GENERIC } else { EXISTS };
        self.sized(cost, EXISTS_SIZE)
    }

    fn charge_move_from(
        &mut self,
        is_generic: bool,
        _ty: impl TypeView,
        val: Option<impl ValueView>,
    ) -> PartialVMResult<()> {
        let cost = if is_generic {
            MOVE_FROM_GENERIC
        } else {
            MOVE_FROM
        };
        self.sized(cost, val.map(size).unwrap_or(1))
    }

    fn charge_move_to(
        &mut self,
        is_generic: bool,
        _ty: impl TypeView,
        val: impl ValueView,
        _is_success: bool,
    ) -> PartialVMResult<()> {
        let cost = if is_generic { MOVE_TO_GENERIC } else { MOVE_TO };
        self.sized(cost, size(val))
    }

    fn charge_vec_pack<'a>(
        &mut self,
        _ty: impl TypeView + 'a,
        args: impl ExactSizeIterator<Item = impl ValueView>,
    ) -> PartialVMResult<()> {
        self.sized(VEC_PACK, args.len() as u64)
    }

    fn charge_vec_len(&mut self, _ty: impl TypeView) -> PartialVMResult<()> {
        self.charge(VEC_LEN)
    }

    fn charge_vec_borrow(
        &mut self,
        is_mut: bool,
        _ty: impl TypeView,
        _is_success: bool,
    ) -> PartialVMResult<()> {
        self.charge(if is_mut {
            VEC_MUT_BORROW
        } else {
            VEC_IMM_BORROW
        })
    }

    fn charge_vec_push_back(
        &mut self,
        _ty: impl TypeView,
        _val: impl ValueView,
    ) -> PartialVMResult<()> {
        self.charge(VEC_PUSH_BACK)
    }

    fn charge_vec_pop_back(
        &mut self,
        _ty: impl TypeView,
        _val: Option<impl ValueView>,
    ) -> PartialVMResult<()> {
        self.charge(VEC_POP_BACK)
    }

    fn charge_vec_unpack(
        &mut self,
        _ty: impl TypeView,
        expect_num_elements: NumArgs,
    ) -> PartialVMResult<()> {
        self.sized(VEC_UNPACK, expect_num_elements.into())
    }

    fn charge_vec_swap(&mut self, _ty: impl TypeView) -> PartialVMResult<()> {
        self.charge(VEC_SWAP)
    }

    fn charge_load_resource(&mut self, loaded: Option<NumBytes>) -> PartialVMResult<()> {
        let bytes: u64 = loaded.map(u64::from).unwrap_or(0);
        self.charge(GLOBAL_MEMORY_PER_BYTE.saturating_mul(bytes))
    }

    fn charge_native_function(&mut self, amount: InternalGas) -> PartialVMResult<()> {
        self.charge(amount.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_zeroes_the_meter_and_fails_out_of_gas() {
        let mut meter = Meter::new(1);
        assert_eq!(meter.used(), 0);
        meter.charge(999).expect("fits");
        assert_eq!(meter.used(), 1, "a started gas unit is paid");
        meter.charge(1).expect("fits exactly");
        let error = meter.charge(1).expect_err("over the limit");
        assert_eq!(error.major_status(), StatusCode::OUT_OF_GAS);
        assert_eq!(meter.used(), 1);
        assert_eq!(meter.used_internal(), INTERNAL_UNITS_PER_GAS);
    }

    #[test]
    fn costs_follow_diems_initial_schedule() {
        let mut meter = Meter::new(10);
        meter
            .charge_simple_instr(SimpleInstruction::Ret)
            .expect("fits");
        assert_eq!(meter.used_internal(), 639);
        meter.charge_ld_const(NumBytes::new(10)).expect("fits");
        assert_eq!(meter.used_internal(), 639 + 20);
        meter
            .charge_load_resource(Some(NumBytes::new(8)))
            .expect("fits");
        assert_eq!(meter.used_internal(), 639 + 20 + 32);
        assert_eq!(intrinsic_gas(200), 600);
        assert_eq!(intrinsic_gas(610), 680);
    }
}

/**
 * The key that signs the log's checkpoints: AUDIT_CHECKPOINT_KEY when set; else derived
 * from the secrets key (SECRETS_KEY's first key, or DATA_DIR/secrets.key) with HKDF,
 * label `gateway:audit-checkpoint`, so every process of one gateway signs alike. A
 * derived key changes when the secrets key is rotated: production sets its own.
 */
export function auditCheckpointKeyOf(infrastructure: {
  readonly config: { readonly auditCheckpointKey: Buffer | null };
  readonly secrets: { derivedKeys(label: string): Buffer[] };
}): Buffer {
  return infrastructure.config.auditCheckpointKey ?? infrastructure.secrets.derivedKeys('audit-checkpoint')[0]!;
}

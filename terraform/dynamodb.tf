# The kv-cache app's store (paper 6.1). On-demand billing: experiments are
# short and bursty, and an idle table costs only its storage. The key schema
# is the one apps/kv-cache/dynamo-store.js reads and writes: a string hash
# key "k" (the offline test compares the two). Encryption at rest uses the
# AWS-owned key, DynamoDB's default, which needs no KMS permissions.
resource "aws_dynamodb_table" "kv" {
  name         = var.ddb_table_name
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "k"

  attribute {
    name = "k"
    type = "S"
  }
}

# The controllers' shared state (controller/state-store.js): the leader lease
# and the persisted assignment, generation and membership, all written with
# conditional writes. A string hash key "pk" and no sort key, as the store
# creates it when it runs without Terraform (the offline test compares the
# two). On-demand: the leader renews its lease about every 0.7 s and each
# standby reads it every 0.2 s, about $0.006 an hour at list prices, plus
# one write per KiB of state whenever the assignment changes.
resource "aws_dynamodb_table" "controller_state" {
  name         = local.controller_state_table_name
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "pk"

  attribute {
    name = "pk"
    type = "S"
  }
}

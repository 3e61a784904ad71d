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

// `dataSource` (TypeORM on PostgreSQL) and its `Order` entity.
import * as preludeTypeorm from 'typeorm';

@preludeTypeorm.Entity('orders')
export class Order {
  @preludeTypeorm.PrimaryColumn('text')
  id!: string;
  @preludeTypeorm.Column('text')
  status!: string;
}
export declare const dataSource: preludeTypeorm.DataSource;
